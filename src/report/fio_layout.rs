//! JSON in fio's own layout (`json.c`: `json_print_object` and friends), so
//! that a script written against fio's output text, not only a JSON
//! parser, reads ours: `"key" : value` with a space on each side of the
//! colon, two spaces of indent per level, every float printed as C's `%f`
//! (six decimals: `"iops" : 16000.000000`, where serde_json writes
//! `16000.0`), and an empty object or array over two lines as fio prints
//! it. Integers stay integers. The values and their order are the caller's.

use serde::Serialize;
use std::io::{self, Write};

/// `value` as fio prints JSON (no newline after the closing brace).
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, FioFormatter { level: 0 });
    value.serialize(&mut ser).expect("a JSON value serializes");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// serde_json's formatter hooks, writing what fio's `json.c` writes.
struct FioFormatter {
    level: usize,
}

impl FioFormatter {
    fn indent<W: ?Sized + Write>(&self, w: &mut W) -> io::Result<()> {
        for _ in 0..self.level {
            w.write_all(b"  ")?;
        }
        Ok(())
    }
    /// `{` or `[`, a newline, one level deeper.
    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level += 1;
        w.write_all(bracket)?;
        w.write_all(b"\n")
    }
    /// A newline, the indent one level up, `}` or `]` (fio prints this
    /// after the members, or after `{\n` when there are none).
    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.level -= 1;
        w.write_all(b"\n")?;
        self.indent(w)?;
        w.write_all(bracket)
    }
    /// `,\n` before every member but the first, then the indent.
    fn member<W: ?Sized + Write>(&self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(b",\n")?;
        }
        self.indent(w)
    }
}

impl serde_json::ser::Formatter for FioFormatter {
    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, v: f64) -> io::Result<()> {
        write!(w, "{v:.6}")
    }
    fn write_f32<W: ?Sized + Write>(&mut self, w: &mut W, v: f32) -> io::Result<()> {
        write!(w, "{v:.6}")
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.member(w, first)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b" : ")
    }
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.member(w, first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fio_layout_as_fio_3_33_prints_it() {
        let v = json!({
            "fio version": "fio-3.33",
            "jobs": [{ "jobname": "t", "read": { "iops": 16000.0, "runtime": 16, "bins": {} } }],
            "disk_util": [],
            "min": -0.5
        });
        let want = "{\n  \"fio version\" : \"fio-3.33\",\n  \"jobs\" : [\n    {\n      \"jobname\" : \"t\",\n      \
                    \"read\" : {\n        \"iops\" : 16000.000000,\n        \"runtime\" : 16,\n        \"bins\" : {\n\n        }\n      }\n    }\n  ],\n  \
                    \"disk_util\" : [\n\n  ],\n  \"min\" : -0.500000\n}";
        assert_eq!(to_string(&v), want);
        // Still JSON, with the same values.
        assert_eq!(serde_json::from_str::<serde_json::Value>(&to_string(&v)).unwrap(), v);
    }
}
