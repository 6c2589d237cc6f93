//! Tests in a fresh process, and the stand-in's call log.

use std::process::Command;

/// Runs test `name` of this binary in a child process with `env`, and returns its
/// (success, stdout + stderr).
pub fn child(name: &str, env: &[(&str, &str)]) -> (bool, String) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"]).env("XFR_CHILD", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success() && text.contains("1 passed"), text)
}

/// Whether this process is a child of [`child`].
pub fn in_child() -> bool {
    std::env::var_os("XFR_CHILD").is_some()
}

/// A fresh log file for the child tagged `tag`.
pub fn log_path(tag: &str) -> String {
    let dir = std::env::temp_dir().join(format!("xfr-stub-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{tag}.log")).to_string_lossy().into_owned()
}

/// The lines of the log so far.
pub fn log_lines() -> Vec<String> {
    let p = std::env::var("XFR_STUB_LOG").expect("XFR_STUB_LOG");
    std::fs::read_to_string(p).unwrap_or_default().lines().map(str::to_string).collect()
}

/// The value of `key=` in a log line.
pub fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// The template name of a launched kernel: `kepler` of `kepler<float>` or of its
/// mangled name `_Z6keplerIfEv...`.
pub fn template_name(name: &str) -> &str {
    if let Some(rest) = name.strip_prefix("_Z") {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if let Ok(len) = rest[..digits].parse::<usize>() {
            return rest.get(digits..digits + len).unwrap_or(name);
        }
    }
    name.split('<').next().unwrap_or(name)
}
