//! fio's job files and command line, read into job definitions: ordered
//! `(key, value)` lists, each job's starting with the `[global]` options
//! before it (fio's inheritance), so applying them in order with
//! [`JobOpts::set`](super::options::JobOpts::set) gives what fio would.
//!
//! Job files: `[section]` headers, `key=value` and bare `key` lines, `;` and
//! `#` comments, `${VAR}` from the environment, `include FILE` (as given if
//! it is there, else beside the including file, as fio looks), `-` for
//! standard input. Command line: `--key=value`, `--key value`, bare
//! booleans; `--name=X` starts a job, options before the first `--name` are
//! global; job file paths among them.

use super::options::is_bool;
use crate::error::Error;
use std::path::{Path, PathBuf};

/// One option as written: key and value (None for a bare key).
pub type Opt = (String, Option<String>);

/// One job: its section name and every option that applies, in order
/// (inherited globals first).
#[derive(Clone, Debug, PartialEq)]
pub struct JobDef {
    pub name: String,
    pub opts: Vec<Opt>,
    /// How many of `opts`, from the start, are inherited globals (fio's
    /// JSON lists them as "global options", the rest as "job options").
    pub inherited: usize,
}

/// Options of the run as a whole (not of a job).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunOpts {
    pub output: Option<String>,
    pub output_format: Vec<String>,
    pub sections: Vec<String>,
    pub parse_only: bool,
    pub readonly: bool,
    /// `--showcmd`: print each job as a command line and run nothing.
    pub showcmd: bool,
}

/// fio's options of the run (not of a job) that take no argument.
const RUN_FLAGS: &[&str] = &["parse-only", "readonly", "version", "help", "showcmd", "warnings-fatal", "cpuclock-test", "crctest"];
/// fio's options of the run that take one (`--eta never` as `--eta=never`).
const RUN_VALUED: &[&str] = &["output", "output-format", "section", "eta", "eta-newline", "eta-interval", "debug", "aux-path", "status-interval", "max-jobs", "alloc-size", "trigger-file", "trigger-timeout", "trigger", "trigger-remote", "inflate-log", "bandwidth-log", "cmdhelp", "enghelp", "client", "server", "idle-prof"];

/// Substitute `${VAR}` from the environment; an unset variable is an error
/// naming it (fio would pass the text through and fail later).
pub fn substitute_env(line: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, Error> {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let Some(j) = rest[i..].find('}') else {
            return Err(Error::usage(format!("unterminated '${{' in job file line: {line}")));
        };
        let var = &rest[i + 2..i + j];
        match lookup(var) {
            Some(v) => out.push_str(&v),
            None => return Err(Error::usage(format!("job file uses ${{{var}}}, which is not set in the environment: export {var}=... first"))),
        }
        rest = &rest[i + j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn split_kv(s: &str) -> Opt {
    match s.split_once('=') {
        Some((k, v)) => (k.trim().to_string(), Some(v.trim().to_string())),
        None => (s.trim().to_string(), None),
    }
}

/// The lines of a job file with its includes expanded, comments dropped
/// and `${VAR}` substituted.
fn lines_of(path: &Path, depth: usize, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<String>, Error> {
    if depth > 16 {
        return Err(Error::usage(format!("{}: includes nested more than 16 deep (an include loop?)", path.display())));
    }
    let text = if path == Path::new("-") {
        // fio's `-`: the job file is standard input.
        let mut t = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut t).map_err(|e| Error::usage(format!("cannot read the job file from standard input ('-'): {e}")))?;
        t
    } else {
        std::fs::read_to_string(path).map_err(|e| Error::usage(format!("cannot read job file {}: {e}", path.display())))?
    };
    let mut out = vec![];
    for raw in text.lines() {
        // fio ends a line at its first ';' or '#' (strip_blank_end): a
        // comment after a value is not part of it.
        let l = raw.split([';', '#']).next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        let l = substitute_env(l, env)?;
        if let Some(file) = l.strip_prefix("include ") {
            // As fio: the name as given when it is there (relative to the
            // working directory), else beside the including file.
            let f = PathBuf::from(file.trim());
            let f = if f.is_absolute() || f.exists() { f } else { path.parent().unwrap_or(Path::new(".")).join(f) };
            out.extend(lines_of(&f, depth + 1, env)?);
            continue;
        }
        out.push(l);
    }
    Ok(out)
}

/// The jobs as one fio command line (`--showcmd`): each job's globals not
/// yet given, then `--name=JOB` and its own options, in order.
pub fn as_command_line(jobs: &[JobDef]) -> String {
    let mut out = String::from("fio");
    let mut given = 0;
    let arg = |(k, v): &Opt| match v {
        Some(v) => format!(" --{k}={v}"),
        None => format!(" --{k}"),
    };
    for j in jobs {
        if j.inherited < given {
            given = 0; // another job file: its globals start over
        }
        out.extend(j.opts[given..j.inherited].iter().map(arg));
        given = j.inherited;
        out.push_str(&format!(" --name={}", j.name));
        out.extend(j.opts[j.inherited..].iter().filter(|(k, _)| k != "name").map(arg));
    }
    out
}

/// Parse a job file: its jobs, each with the globals before it. `global`
/// holds options that apply before the file's own (the command line's).
pub fn parse_file(path: &Path, global: &[Opt], env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<JobDef>, Error> {
    let mut global = global.to_vec();
    let mut jobs: Vec<JobDef> = vec![];
    let mut in_global = false;
    let mut any_section = false;
    for l in lines_of(path, 0, env)? {
        if let Some(sec) = l.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            any_section = true;
            in_global = sec == "global";
            if !in_global {
                // The section names the job (fio does not list it among the
                // job's options, as it does a `name=` line).
                jobs.push(JobDef { name: sec.to_string(), opts: global.clone(), inherited: global.len() });
            }
            continue;
        }
        if !any_section {
            return Err(Error::usage(format!("{}: option '{l}' before any [section]; put it under [global] or a job's section", path.display())));
        }
        let kv = split_kv(&l);
        if in_global {
            global.push(kv);
        } else {
            jobs.last_mut().unwrap().opts.push(kv);
        }
    }
    Ok(jobs)
}

/// Parse fio's command line (after `fio`): run options, and the jobs of
/// `--name` sections, then those of the job files, as fio orders them (it
/// reads the job files after the whole command line). Options outside any
/// `--name` job are globals, wherever they stand beside a job file: they
/// apply to the `--name` jobs after them and to every job of the first job
/// file, under the file's own `[global]` (fio starts each further job file
/// from its defaults).
pub fn parse_command_line(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<(RunOpts, Vec<JobDef>), Error> {
    let mut run = RunOpts::default();
    let mut global: Vec<Opt> = vec![];
    let mut jobs: Vec<JobDef> = vec![];
    let mut cmdline_job: Option<usize> = None;
    let mut files: Vec<String> = vec![];
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        let Some(opt) = a.strip_prefix("--").or_else(|| a.strip_prefix('-').filter(|s| s.len() > 1)) else {
            // A job file: read after the command line, as fio does.
            files.push(a.clone());
            continue;
        };
        let (key, mut val) = split_kv(opt);
        // `--key value`: a boolean takes the next argument only when it is
        // a boolean word (fio's bare set options, e.g. --thread, take none);
        // a run option takes it when fio's does.
        let bare_ok = RUN_FLAGS.contains(&key.as_str());
        if val.is_none() && !bare_ok && i < args.len() {
            let next = args[i].as_str();
            // A log's prefix is optional (bare: the job's name), so the
            // next option is not taken for it.
            let optional = matches!(key.as_str(), "write_bw_log" | "write_iops_log" | "write_lat_log") && next.starts_with('-');
            let valued = RUN_VALUED.contains(&key.as_str());
            if valued || (!optional && (!is_bool(&key) || matches!(next, "0" | "1" | "true" | "false" | "on" | "off" | "yes" | "no"))) {
                val = Some(next.to_string());
                i += 1;
            }
        }
        let need = |v: &Option<String>| v.clone().ok_or_else(|| Error::usage(format!("--{key} needs a value (--{key}=...)")));
        match key.as_str() {
            "output" => run.output = Some(need(&val)?),
            "output-format" => {
                run.output_format = need(&val)?.split(',').map(|s| s.trim().to_string()).collect();
                for f in &run.output_format {
                    if !matches!(f.as_str(), "normal" | "json" | "json+") {
                        return Err(Error::usage(format!("--output-format={f} is not supported; use normal, json or json+ (comma-separated to combine)")));
                    }
                }
            }
            "section" => run.sections.push(need(&val)?),
            "parse-only" => run.parse_only = true,
            "readonly" => run.readonly = true,
            "minimal" | "terse-version" | "append-terse" | "bandwidth-log" | "status-interval" | "inflate-log" | "server" | "client" | "cmdhelp" | "enghelp" | "crctest" | "idle-prof" | "trigger-file" | "trigger" | "trigger-remote" | "alloc-size" | "max-jobs" | "merge-blktrace-only" => {
                return Err(Error::usage(format!("fio's --{key} is not supported by nvme-bypass fio; remove it")));
            }
            "showcmd" => run.showcmd = true,
            "eta" | "eta-newline" | "eta-interval" | "warnings-fatal" | "debug" | "aux-path" => {}
            "name" => {
                let name = need(&val)?;
                let mut opts = global.clone();
                opts.push(("name".into(), Some(name.clone())));
                jobs.push(JobDef { name, opts, inherited: global.len() });
                cmdline_job = Some(jobs.len() - 1);
            }
            _ => {
                // Checked here so a typo is reported with the option's name.
                super::options::lookup(&key)?;
                match cmdline_job {
                    Some(j) => jobs[j].opts.push((key, val)),
                    None => global.push((key, val)),
                }
            }
        }
    }
    if files.iter().filter(|f| *f == "-").count() > 1 {
        return Err(Error::usage("'-' (the job file on standard input) is given twice; standard input holds one job file: give it once"));
    }
    for (n, f) in files.iter().enumerate() {
        let globals = if n == 0 { &global[..] } else { &[] };
        let mut more = parse_file(Path::new(f), globals, env)?;
        // fio separates job files by a stonewall on the first job of each
        // after the first.
        if let (Some(first), true) = (more.first_mut(), n > 0) {
            first.opts.push(("stonewall".into(), None));
        }
        jobs.extend(more);
    }
    if jobs.is_empty() {
        return Err(Error::usage("no jobs: give --name=NAME with the job's options (as fio needs), or a job file"));
    }
    if !run.sections.is_empty() {
        let all: Vec<String> = jobs.iter().map(|j| j.name.clone()).collect();
        jobs.retain(|j| run.sections.contains(&j.name));
        if jobs.is_empty() {
            return Err(Error::usage(format!("--section {}: no such job; the jobs are {}", run.sections.join(","), all.join(", "))));
        }
    }
    if run.output_format.is_empty() {
        run.output_format.push("normal".into());
    }
    Ok((run, jobs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        (k == "DEV").then(|| "/dev/nvme0n1".to_string())
    }

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    fn get<'a>(j: &'a JobDef, k: &str) -> Option<&'a str> {
        j.opts.iter().rev().find(|(key, _)| key == k).and_then(|(_, v)| v.as_deref())
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nvme-bypass-jobfile-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn command_line_in_all_three_forms() {
        let (run, jobs) = parse_command_line(&args(&["--randrepeat=1", "--direct", "1", "--gtod_reduce=1", "--name=test", "--bs", "4k", "--thread", "--output=x.txt", "--output-format=normal,json"]), &env).unwrap();
        assert_eq!(run.output.as_deref(), Some("x.txt"));
        assert_eq!(run.output_format, vec!["normal", "json"]);
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].opts, vec![("randrepeat".into(), Some("1".into())), ("direct".into(), Some("1".into())), ("gtod_reduce".into(), Some("1".into())), ("name".into(), Some("test".into())), ("bs".into(), Some("4k".into())), ("thread".into(), None)]);
        let e = parse_command_line(&args(&["--name=x", "--no_such=5"]), &env).err().unwrap().to_string();
        assert!(e.contains("'no_such'"), "{e}");
        assert!(parse_command_line(&args(&["--bs=4k"]), &env).is_err(), "no job");
    }

    #[test]
    fn job_files_inherit_globals_substitute_env_include_and_select_sections() {
        let d = tmpdir("a");
        std::fs::write(d.join("common.fio"), "ioengine=libaio\n").unwrap();
        std::fs::write(
            d.join("job.fio"),
            "; comment\n# another\n[global]\ninclude common.fio\nfilename=${DEV}\nbs=4k\ndirect\n\n[first]\nrw=randread\n[second]\nstonewall\nrw=randwrite\nbs=8k\n[global]\niodepth=8\n[third]\nrw=read\n",
        )
        .unwrap();
        let f = d.join("job.fio");
        let (_, jobs) = parse_command_line(&args(&["--runtime=5", f.to_str().unwrap()]), &env).unwrap();
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["first", "second", "third"]);
        assert_eq!(get(&jobs[0], "ioengine"), Some("libaio"));
        assert_eq!(get(&jobs[0], "filename"), Some("/dev/nvme0n1"));
        assert_eq!(get(&jobs[0], "runtime"), Some("5"), "command-line options before the file act as globals");
        assert_eq!(get(&jobs[1], "bs"), Some("8k"));
        assert!(jobs[1].opts.contains(&("stonewall".into(), None)));
        assert!(jobs[0].opts.contains(&("direct".into(), None)));
        assert_eq!(get(&jobs[0], "iodepth"), None, "a later [global] applies to later jobs only");
        assert_eq!(get(&jobs[2], "iodepth"), Some("8"));
        let (_, jobs) = parse_command_line(&args(&["--section", "second", f.to_str().unwrap()]), &env).unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].name, "second");
        let e = parse_command_line(&args(&["--section=nope", f.to_str().unwrap()]), &env).err().unwrap().to_string();
        assert!(e.contains("first, second, third"), "{e}");
        // Options after the job file are globals too, and a job file's
        // own [global] comes after them; a second job file starts from
        // the defaults, behind a stonewall.
        std::fs::write(d.join("two.fio"), "[global]\nbs=16k ; inline comment\n[fourth]\nrw=write # another\n").unwrap();
        let t = d.join("two.fio");
        let (_, jobs) = parse_command_line(&args(&[f.to_str().unwrap(), "--runtime=7", "--bs=2k", t.to_str().unwrap()]), &env).unwrap();
        assert_eq!(get(&jobs[0], "runtime"), Some("7"), "an option after the job file applies to its jobs");
        assert_eq!(get(&jobs[0], "bs"), Some("4k"), "the file's [global] is read after the command line's");
        assert_eq!(get(&jobs[3], "runtime"), None, "a second job file starts from the defaults");
        assert_eq!(get(&jobs[3], "bs"), Some("16k"), "the comment is not part of the value");
        assert_eq!(get(&jobs[3], "rw"), Some("write"));
        assert!(jobs[3].opts.contains(&("stonewall".into(), None)));
        assert!(!jobs[0].opts.contains(&("stonewall".into(), None)));
        // --name jobs come first, then the files'; run options that take a
        // value take the next argument, flags do not.
        let (run, jobs) = parse_command_line(&args(&["--showcmd", t.to_str().unwrap(), "--eta", "never", "--name=cli", "--rw=read"]), &env).unwrap();
        assert!(run.showcmd);
        assert_eq!(jobs.iter().map(|j| j.name.as_str()).collect::<Vec<_>>(), ["cli", "fourth"]);
        assert_eq!(as_command_line(&jobs), "fio --name=cli --rw=read --bs=16k --name=fourth --rw=write");
        std::fs::write(d.join("bad.fio"), "[j]\nfilename=${NOPE}\n").unwrap();
        let e = parse_command_line(&args(&[d.join("bad.fio").to_str().unwrap()]), &env).err().unwrap().to_string();
        assert!(e.contains("${NOPE}") && e.contains("export NOPE"), "{e}");
        let _ = std::fs::remove_dir_all(d);
    }
}
