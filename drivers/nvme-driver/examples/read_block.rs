//! Write one block and read it back through an I/O queue pair: the hot path
//! in its smallest form.
//!
//! ```text
//! cargo run --example read_block
//! ```
//!
//! Create an I/O queue pair (CQ first, then the SQ that names it), post a
//! Write, ring the submission doorbell, poll the completion queue (the
//! phase tag says which entries are new), then the same for a Read.
//! Follow `QueuePair::submit`, `ring` and `poll` into
//! `drivers/nvme-driver/src/qpair.rs` and `queue.rs`.

use nvme_driver::{Controller, ControllerConfig, DataPtr};
use nvme_sim::{SimConfig, SimController};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sim = SimController::start(SimConfig { threaded: false, ..SimConfig::default() })?;
    let mut ctrl = Controller::new(sim.registers(), sim.allocator(), ControllerConfig::default())?;
    let lba_size = ctrl.identify_namespace(1)?.lba_size() as usize;

    let mut qp = ctrl.create_io_queue_pair(8)?;
    // A DMA buffer: memory the controller reaches by bus address. We copy
    // into and out of it; we never hold a reference into it. The controller
    // owns it with the queue, so it outlives anything the controller may
    // still write into it.
    let buf = ctrl.alloc_queue_buffer(&qp, 4096)?;
    let block = DataPtr { iova: buf.iova(), len: lba_size };

    let message = b"hello from a userspace NVMe driver";
    buf.copy_from(0, message);
    qp.write(1, 42, 1, block, 1)?; // post: nothing reaches the controller yet
    qp.ring(); // one MMIO write tells the controller about it
    wait(&mut qp, "write");

    buf.fill(0, 4096, 0);
    qp.read(1, 42, 1, block, 2)?;
    qp.ring();
    wait(&mut qp, "read");

    let mut back = vec![0u8; message.len()];
    buf.copy_to(0, &mut back);
    println!("LBA 42 holds: {:?}", String::from_utf8_lossy(&back));
    assert_eq!(&back, message);

    ctrl.delete_io_queue_pair(qp)?;
    ctrl.shutdown()?;
    Ok(())
}

fn wait<R: nvme_hal::RegisterWindow + ?Sized>(qp: &mut nvme_driver::QueuePair<R>, what: &str) {
    loop {
        let mut done = false;
        qp.poll(1, |c| {
            println!("{what}: tag {} cid {} -> {}", c.tag, c.cid, c.status());
            done = true;
        });
        if done {
            return;
        }
    }
}
