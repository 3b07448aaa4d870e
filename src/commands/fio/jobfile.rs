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
    /// `--terse-version`: the layout of the terse line (fio's default 3
    /// when None).
    pub terse_version: Option<u8>,
}

/// fio's options of the run (not of a job) that take no argument.
const RUN_FLAGS: &[&str] = &["minimal", "append-terse", "parse-only", "readonly", "version", "help", "showcmd", "warnings-fatal", "cpuclock-test", "crctest"];
/// fio's options of the run that take one (`--eta never` as `--eta=never`).
const RUN_VALUED: &[&str] = &["output", "output-format", "terse-version", "section", "eta", "eta-newline", "eta-interval", "debug", "aux-path", "status-interval", "max-jobs", "alloc-size", "trigger-file", "trigger-timeout", "trigger", "trigger-remote", "inflate-log", "bandwidth-log", "cmdhelp", "enghelp", "client", "server", "idle-prof"];

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

/// fio's reserved keywords (options.c `fio_keywords`) and what they stand
/// for here: the page size, the megabytes of memory, the CPUs configured
/// (`sysconf`, as fio 3.33 reads them on Linux).
pub fn keywords() -> [(&'static str, String); 3] {
    // SAFETY: sysconf takes a name and reads the system's configuration.
    let sc = |name| unsafe { libc::sysconf(name) }.max(0) as u64;
    let page = sc(libc::_SC_PAGESIZE);
    [("$pagesize", page.to_string()), ("$mb_memory", ((sc(libc::_SC_PHYS_PAGES) * page) >> 20).to_string()), ("$ncpus", sc(libc::_SC_NPROCESSORS_CONF).to_string())]
}

/// fio's keyword replacement in a job file's option line
/// (`fio_keyword_replace`): every keyword of `kw` replaced by its value;
/// then, when one was and the line holds `+`, `-`, `*` or `/` (and no
/// `'`), the value after the first `=` computed as fio has `bc` compute it
/// (`bc_calc`). What bc cannot compute fio refuses ("failed parsing"), and
/// so does this, saying why.
pub fn replace_keywords(opt: &str, kw: &[(&str, String)]) -> Result<String, Error> {
    let mut s = opt.to_string();
    let mut any = false;
    for (word, value) in kw {
        if s.contains(word) {
            s = s.replace(word, value);
            any = true;
        }
    }
    if !any || !s.contains(['+', '-', '*', '/']) || s.contains('\'') {
        return Ok(s);
    }
    let Some((key, expr)) = s.split_once('=') else { return Ok(s) };
    let v = bc(expr).map_err(|why| {
        Error::usage(format!(
            "job file option '{opt}' reads '{s}' with fio's keywords replaced, and fio has bc compute that, which takes whole numbers and + - * / % ^ ( ) only: {why}; fio refuses it too (\"failed parsing\"): write plain numbers (a size in bytes, e.g. 2048 for 2k)"
        ))
    })?;
    Ok(format!("{key}={v}"))
}

/// `bc`'s arithmetic at its default scale 0, as fio's `bc_calc` runs it:
/// whole numbers, `+ - * / % ^` and parentheses, bc's precedence (unary
/// minus over `^`, right to left, over `* / %`, over `+ -`); division
/// drops the fraction.
fn bc(expr: &str) -> Result<i128, String> {
    struct P<'a> {
        s: &'a str,
        i: usize,
    }
    impl P<'_> {
        fn peek(&mut self) -> Option<u8> {
            while self.s.as_bytes().get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
                self.i += 1;
            }
            self.s.as_bytes().get(self.i).copied()
        }
        fn sum(&mut self) -> Result<i128, String> {
            let mut v = self.product()?;
            while let Some(op @ (b'+' | b'-')) = self.peek() {
                self.i += 1;
                let r = self.product()?;
                v = if op == b'+' { v.checked_add(r) } else { v.checked_sub(r) }.ok_or("the result is too large")?;
            }
            Ok(v)
        }
        fn product(&mut self) -> Result<i128, String> {
            let mut v = self.power()?;
            while let Some(op @ (b'*' | b'/' | b'%')) = self.peek() {
                self.i += 1;
                let r = self.power()?;
                v = match op {
                    b'*' => v.checked_mul(r),
                    _ if r == 0 => return Err("a division by zero".into()),
                    b'/' => v.checked_div(r),
                    _ => v.checked_rem(r),
                }
                .ok_or("the result is too large")?;
            }
            Ok(v)
        }
        fn power(&mut self) -> Result<i128, String> {
            let base = self.unary()?;
            if self.peek() != Some(b'^') {
                return Ok(base);
            }
            self.i += 1;
            let e = u32::try_from(self.power()?).map_err(|_| "a negative or huge exponent")?;
            base.checked_pow(e).ok_or_else(|| "the result is too large".into())
        }
        fn unary(&mut self) -> Result<i128, String> {
            match self.peek() {
                Some(b'-') => {
                    self.i += 1;
                    Ok(-self.unary()?)
                }
                Some(b'(') => {
                    self.i += 1;
                    let v = self.sum()?;
                    if self.peek() != Some(b')') {
                        return Err("a '(' without its ')'".into());
                    }
                    self.i += 1;
                    Ok(v)
                }
                Some(c) if c.is_ascii_digit() => {
                    let rest = &self.s[self.i..];
                    let n = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
                    self.i += n;
                    rest[..n].parse().map_err(|_| "a number too large".into())
                }
                Some(_) => Err(format!("'{}' is not a number", self.s[self.i..].split(|c: char| "+-*/%^() ".contains(c)).next().unwrap_or(""))),
                None => Err("an operator without its number".into()),
            }
        }
    }
    let mut p = P { s: expr, i: 0 };
    let v = p.sum()?;
    match p.peek() {
        None => Ok(v),
        Some(_) => Err(format!("'{}' is not a number or operator", &expr[p.i..])),
    }
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
        if depth > 0 && l.starts_with('[') {
            return Err(Error::usage(format!("{}: {l}: a section in an included file; fio takes none there (\"No new sections in included files\"): put the section in the including file", path.display())));
        }
        let mut l = substitute_env(l, env)?;
        if !l.starts_with('[') && !l.starts_with("include ") {
            l = replace_keywords(&l, &keywords())?;
        }
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
    // Where the [global] section being read starts in `global`.
    let mut global_from = global.len();
    // fio sorts each section's options before it applies them (parse.c
    // `sort_options`, by the options' `prio`; a stable sort here, as
    // fio's qsort was in fio 3.33 as run beside these tests): its JSON and
    // --showcmd list them in that order (filename last).
    let prio = |(k, _): &Opt| std::cmp::Reverse(match k.as_str() {
        "filename" | "filename_format" => -1,
        "lockfile" | "cpus_allowed_policy" | "kb_base" | "unit_base" => 1,
        _ => 0,
    });
    let sort_section = |in_global: bool, global: &mut Vec<Opt>, global_from: usize, jobs: &mut Vec<JobDef>| {
        if in_global {
            global[global_from..].sort_by_key(prio);
        } else if let Some(j) = jobs.last_mut() {
            j.opts[j.inherited..].sort_by_key(prio);
        }
    };
    for l in lines_of(path, 0, env)? {
        if let Some(sec) = l.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            sort_section(in_global, &mut global, global_from, &mut jobs);
            any_section = true;
            // fio: any section whose name starts with "global" (init.c:
            // `!strncmp(name, "global", 6)`).
            in_global = sec.starts_with("global");
            global_from = global.len();
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
    sort_section(in_global, &mut global, global_from, &mut jobs);
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
        // fio 3.33 replaces its keywords in job files only ("failed
        // parsing numjobs=$ncpus" on its command line).
        if let Some((word, _)) = keywords().into_iter().find(|(w, _)| val.as_deref().is_some_and(|v| v.contains(w))) {
            return Err(Error::usage(format!(
                "--{key}={}: fio replaces {word} in job files, not on the command line (fio 3.33 fails to parse it there too); put the option in a job file, or write the number (the shell's $(nproc), $(getconf PAGESIZE))",
                val.as_deref().unwrap_or("")
            )));
        }
        match key.as_str() {
            "output" => run.output = Some(need(&val)?),
            "output-format" => {
                run.output_format = need(&val)?.split(',').map(|s| s.trim().to_string()).collect();
                for f in &mut run.output_format {
                    // fio's names of its terse output (init.c parse_output_format).
                    if matches!(f.as_str(), "minimal" | "csv") {
                        *f = "terse".into();
                    }
                    if !matches!(f.as_str(), "normal" | "json" | "json+" | "terse") {
                        return Err(Error::usage(format!("--output-format={f} is not supported; use normal, terse, json or json+ (comma-separated to combine)")));
                    }
                }
            }
            // As fio: --minimal replaces the formats given before it,
            // --append-terse adds terse to them.
            "minimal" => run.output_format = vec!["terse".into()],
            "append-terse" => {
                if run.output_format.is_empty() {
                    run.output_format.push("normal".into());
                }
                if !run.output_format.iter().any(|f| f == "terse") {
                    run.output_format.push("terse".into());
                }
            }
            "terse-version" => {
                let v = need(&val)?;
                match v.trim().parse::<u8>() {
                    Ok(n) if super::terse::VERSIONS.contains(&n) => run.terse_version = Some(n),
                    _ => return Err(Error::usage(format!("--terse-version={v}: fio writes terse versions 2, 3 (its default), 4 and 5; give one of them"))),
                }
            }
            "section" => run.sections.push(need(&val)?),
            "parse-only" => run.parse_only = true,
            "readonly" => run.readonly = true,
            "bandwidth-log" | "status-interval" | "inflate-log" | "server" | "client" | "cmdhelp" | "enghelp" | "crctest" | "idle-prof" | "trigger-file" | "trigger" | "trigger-remote" | "alloc-size" | "max-jobs" | "merge-blktrace-only" => {
                return Err(Error::usage(refused_run_option(&key)));
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
    // --section picks among the job files' jobs (fio skips the others as
    // it reads the files); the command line's --name jobs all run.
    let mut in_files: Vec<String> = vec![];
    for (n, f) in files.iter().enumerate() {
        let globals = if n == 0 { &global[..] } else { &[] };
        let mut more = parse_file(Path::new(f), globals, env)?;
        in_files.extend(more.iter().map(|j| j.name.clone()));
        if !run.sections.is_empty() {
            more.retain(|j| run.sections.contains(&j.name));
        }
        // fio separates job files by a stonewall on the first job of each
        // after the first.
        if let (Some(first), true) = (more.first_mut(), n > 0) {
            first.opts.push(("stonewall".into(), None));
        }
        jobs.extend(more);
    }
    if jobs.is_empty() && !run.sections.is_empty() && !in_files.is_empty() {
        return Err(Error::usage(format!("--section {}: no such job; the jobs are {}", run.sections.join(","), in_files.join(", "))));
    }
    if jobs.is_empty() {
        return Err(Error::usage("no jobs: give --name=NAME with the job's options (as fio needs), or a job file"));
    }
    if run.output_format.is_empty() {
        run.output_format.push("normal".into());
    }
    Ok((run, jobs))
}

/// Why a run option of fio's (`--key`) is refused, and whether ignoring
/// it would change the result, as a job option's refusal says.
fn refused_run_option(key: &str) -> String {
    let (what, changes) = match key {
        "status-interval" => ("it prints the whole report every N seconds while the jobs run", false),
        "bandwidth-log" => ("it writes fio's aggregate bandwidth log", false),
        "idle-prof" => ("it runs an idle thread on every CPU to measure what is left, which takes CPU from the jobs", true),
        "server" | "client" => ("fio's client/server mode runs jobs on other machines; nvme-bypass runs them here", true),
        "trigger-file" | "trigger" | "trigger-remote" => ("it runs a command when a trigger fires", false),
        "alloc-size" | "max-jobs" => ("it sets fio's own memory pool or job limit, which nvme-bypass does not have", false),
        _ => ("it is one of fio's tools, not a run of jobs", false),
    };
    let effect = if changes {
        "ignoring it would change the result"
    } else {
        "ignoring it would not change the figures, but it would silently not happen"
    };
    format!("fio's --{key} is not supported by nvme-bypass fio ({what}); {effect}: remove it")
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
    fn fios_keywords_are_replaced_and_computed_as_bc_computes_them() {
        let kw = [("$pagesize", "4096".to_string()), ("$mb_memory", "24105".to_string()), ("$ncpus", "2".to_string())];
        let r = |s: &str| replace_keywords(s, &kw);
        assert_eq!(r("numjobs=$ncpus").unwrap(), "numjobs=2");
        assert_eq!(r("bs=$pagesize").unwrap(), "bs=4096");
        // As fio 3.33 gave them: size=5120, iodepth=4 (bc: whole numbers).
        assert_eq!(r("size=$mb_memory/4096*1024").unwrap(), "size=5120");
        assert_eq!(r("iodepth=$ncpus*3/2+1").unwrap(), "iodepth=4");
        assert_eq!(r("size = 8 * $mb_memory").unwrap(), "size =192840");
        assert_eq!(r("x=(1+$ncpus)*2^3-7%4").unwrap(), "x=21");
        assert_eq!(r("x=-$ncpus^2").unwrap(), "x=4", "bc's unary minus binds over ^");
        // No keyword: no arithmetic (fio passes the line on as it is).
        assert_eq!(r("filename=/dev/nvme0n1-x").unwrap(), "filename=/dev/nvme0n1-x");
        // What bc cannot compute fio refuses ("failed parsing"), and so
        // does this, saying why.
        let e = r("size=$mb_memory/1000*2k").unwrap_err().to_string();
        assert!(e.contains("size=24105/1000*2k") && e.contains("'k' is not a number") && e.contains("failed parsing"), "{e}");
        assert!(r("numjobs=$ncpus/0").unwrap_err().to_string().contains("division by zero"));
        assert!(r("numjobs=($ncpus+1").unwrap_err().to_string().contains("without its ')'"));
        let k = keywords();
        assert!(k.iter().all(|(_, v)| v.parse::<u64>().is_ok_and(|n| n > 0)), "{k:?}");
    }

    #[test]
    fn keywords_in_a_job_file_and_not_on_the_command_line() {
        let d = tmpdir("kw");
        std::fs::write(d.join("k.fio"), "[global]\nnumjobs=$ncpus\n[k]\niodepth=$ncpus*2\n").unwrap();
        let (_, jobs) = parse_command_line(&args(&[d.join("k.fio").to_str().unwrap()]), &env).unwrap();
        let n: u64 = keywords()[2].1.parse().unwrap();
        assert_eq!(get(&jobs[0], "numjobs"), Some(n.to_string().as_str()));
        assert_eq!(get(&jobs[0], "iodepth"), Some((2 * n).to_string().as_str()));
        let e = parse_command_line(&args(&["--name=x", "--numjobs=$ncpus"]), &env).err().unwrap().to_string();
        assert!(e.contains("in job files, not on the command line"), "{e}");
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn each_sections_options_are_sorted_as_fio_sorts_them() {
        // fio 3.33 --showcmd of this file: "--kb_base=1024 --filename=x
        // --cpus_allowed_policy=split --bs=8k --name=j --kb_base=1024
        // --size=1M --filename=y" (it repeats the globals; we do not).
        let d = tmpdir("prio");
        std::fs::write(d.join("p.fio"), "[global]\nfilename=x\nkb_base=1024\n[global]\ncpus_allowed_policy=split\nbs=8k\n[j]\nfilename=y\nsize=1M\nkb_base=1024\n").unwrap();
        let (_, jobs) = parse_command_line(&args(&["--bs=4k", "--filename=z", d.join("p.fio").to_str().unwrap()]), &env).unwrap();
        assert_eq!(as_command_line(&jobs), "fio --bs=4k --filename=z --kb_base=1024 --filename=x --cpus_allowed_policy=split --bs=8k --name=j --kb_base=1024 --size=1M --filename=y");
        let _ = std::fs::remove_dir_all(d);
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
        // fio's run options not supported: refused saying what they do and
        // whether ignoring them would change the result.
        for (opt, says) in [("--status-interval=1", "prints the whole report every N seconds while the jobs run); ignoring it would not change the figures"), ("--idle-prof=system", "ignoring it would change the result")] {
            let e = parse_command_line(&args(&["--name=x", opt]), &env).err().unwrap().to_string();
            assert!(e.contains(&format!("fio's {}", opt.split('=').next().unwrap())) && e.contains(says), "{e}");
        }
    }

    #[test]
    fn terse_formats_combine_as_fios() {
        let formats = |a: &[&str]| {
            let a: Vec<&str> = a.iter().copied().chain(["--name=x"]).collect();
            parse_command_line(&args(&a), &env).map(|(r, _)| (r.output_format, r.terse_version))
        };
        // --minimal replaces the formats before it; --append-terse adds
        // terse (to fio's default normal); a later --output-format replaces.
        assert_eq!(formats(&["--output-format=json", "--minimal"]).unwrap(), (vec!["terse".to_string()], None));
        assert_eq!(formats(&["--append-terse", "--terse-version", "5"]).unwrap(), (vec!["normal".to_string(), "terse".into()], Some(5)));
        assert_eq!(formats(&["--minimal", "--output-format=csv,json"]).unwrap(), (vec!["terse".to_string(), "json".into()], None));
        for bad in ["1", "6", "three"] {
            let e = formats(&["--minimal", &format!("--terse-version={bad}")]).err().unwrap().to_string();
            assert!(e.contains("versions 2, 3 (its default), 4 and 5"), "{e}");
        }
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
        // --section picks among the files' jobs; --name jobs run, as fio's.
        let (_, jobs) = parse_command_line(&args(&["--name=cli", "--section=second", f.to_str().unwrap()]), &env).unwrap();
        assert_eq!(jobs.iter().map(|j| j.name.as_str()).collect::<Vec<_>>(), ["cli", "second"]);
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
        // fio's [global...]: any section whose name starts with "global".
        std::fs::write(d.join("g.fio"), "[global-opts]\nbs=64k\n[j]\n").unwrap();
        let (_, jobs) = parse_command_line(&args(&[d.join("g.fio").to_str().unwrap()]), &env).unwrap();
        assert_eq!((jobs.len(), get(&jobs[0], "bs")), (1, Some("64k")));
        // No sections in an included file, as fio.
        std::fs::write(d.join("sec.fio"), "[k]\nbs=4k\n").unwrap();
        std::fs::write(d.join("inc.fio"), "[j]\ninclude sec.fio\n").unwrap();
        let e = parse_command_line(&args(&[d.join("inc.fio").to_str().unwrap()]), &env).err().unwrap().to_string();
        assert!(e.contains("No new sections in included files"), "{e}");
        std::fs::write(d.join("bad.fio"), "[j]\nfilename=${NOPE}\n").unwrap();
        let e = parse_command_line(&args(&[d.join("bad.fio").to_str().unwrap()]), &env).err().unwrap().to_string();
        assert!(e.contains("${NOPE}") && e.contains("export NOPE"), "{e}");
        let _ = std::fs::remove_dir_all(d);
    }
}
