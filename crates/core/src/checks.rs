//! Business checks a schema cannot express, run after validation and before permission: a path argument must
//! resolve inside a root (`pathWithin`), a URL argument's host must be on a list (`urlHosts`). A failure is an
//! invalid argument, whoever may call the tool.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug)]
pub enum Check {
    PathWithin { arg: String, root: PathBuf },
    UrlHosts { arg: String, hosts: Vec<String> },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeclaredPath {
    arg: String,
    root: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeclaredHosts {
    arg: String,
    hosts: Vec<String>,
}

/// One declaration or a list of them.
fn each<T: serde::de::DeserializeOwned>(value: &Value, what: &str, form: &str) -> Result<Vec<T>, String> {
    let list = match value {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    };
    list.into_iter().map(|v| serde_json::from_value(v).map_err(|e| format!("{what} must be {form} or a list of them ({e})"))).collect()
}

/// The checks a tool declares; the roots are resolved now (a root that does not exist is a programmer error).
pub fn declared(path_within: Option<&Value>, url_hosts: Option<&Value>) -> Result<Vec<Check>, String> {
    let mut checks = Vec::new();
    if let Some(value) = path_within {
        for d in each::<DeclaredPath>(value, "pathWithin", "{ arg, root }")? {
            let root = Path::new(&d.root).canonicalize().map_err(|e| format!("pathWithin: the root {} cannot be resolved ({e})", d.root))?;
            checks.push(Check::PathWithin { arg: d.arg, root });
        }
    }
    if let Some(value) = url_hosts {
        for d in each::<DeclaredHosts>(value, "urlHosts", "{ arg, hosts: [...] }")? {
            if d.hosts.is_empty() {
                return Err("urlHosts: hosts must list at least one host".into());
            }
            checks.push(Check::UrlHosts { arg: d.arg, hosts: d.hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect() });
        }
    }
    Ok(checks)
}

/// The first problem with the arguments, worded for the model.
pub fn run(checks: &[Check], args: &Value) -> Result<(), String> {
    for check in checks {
        match check {
            Check::PathWithin { arg, root } => {
                if let Some(path) = text(args, arg)? {
                    within(root, path).map_err(|why| format!("the path in \"{arg}\" {why}; use a path inside {}", root.display()))?;
                }
            }
            Check::UrlHosts { arg, hosts } => {
                if let Some(url) = text(args, arg)? {
                    host_allowed(hosts, url).map_err(|why| format!("the URL in \"{arg}\" {why}; allowed hosts: {}", hosts.join(", ")))?;
                }
            }
        }
    }
    Ok(())
}

/// The argument's text (a top-level name or a JSON pointer); None when the call leaves it out.
fn text<'a>(args: &'a Value, arg: &str) -> Result<Option<&'a str>, String> {
    let value = if arg.starts_with('/') { args.pointer(arg) } else { args.get(arg) };
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("\"{arg}\" must be a string to be checked")),
    }
}

/// A path resolves inside `root`, as the kernel would resolve it: relative paths start at the root, and the path is
/// walked one component at a time, each symlink followed (dangling ones too) before a later `..` applies. The part
/// that does not exist yet may not climb with `..`.
fn within(root: &Path, path: &str) -> Result<(), String> {
    if path.is_empty() || path.contains('\0') {
        return Err("is empty or holds a NUL character".into());
    }
    let given = Path::new(path);
    let mut at = if given.is_absolute() { PathBuf::from("/") } else { root.to_path_buf() };
    let mut parts: VecDeque<OsString> = parts_of(given);
    let mut links = 0;
    while let Some(part) = parts.pop_front() {
        if part == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&part);
        match fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > 40 {
                    return Err("goes through too many symbolic links".into());
                }
                let target = fs::read_link(&next).map_err(|e| format!("cannot be resolved ({e})"))?;
                if target.is_absolute() {
                    at = PathBuf::from("/");
                }
                for p in parts_of(&target).into_iter().rev() {
                    parts.push_front(p);
                }
            }
            Ok(_) => at = next,
            Err(_) => {
                // From here on nothing exists: the rest is lexical, and may not climb.
                at = next;
                for p in parts.drain(..) {
                    if p == ".." {
                        return Err("climbs with .. out of a folder that does not exist".into());
                    }
                    at.push(p);
                }
            }
        }
    }
    match (at.starts_with(root), links) {
        (true, _) => Ok(()),
        (false, 0) => Err("is outside the allowed folder".into()),
        (false, _) => Err("leads outside the allowed folder through a symbolic link".into()),
    }
}

/// A path's names and `..`s (`.` and the root dropped).
fn parts_of(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect()
}

/// A URL's host (as a browser reads it: userinfo, IDNA, case) is one of `hosts` or under a `*.` entry.
fn host_allowed(hosts: &[String], text: &str) -> Result<(), String> {
    let url = url::Url::parse(text).map_err(|e| format!("is not a valid absolute URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("uses the scheme {}, not http or https", url.scheme()));
    }
    let host = url.host_str().ok_or("has no host")?.trim_end_matches('.').to_ascii_lowercase();
    let allowed = hosts.iter().any(|h| match h.strip_prefix("*.") {
        Some(domain) => host.ends_with(&format!(".{domain}")),
        None => host == *h,
    });
    if allowed {
        Ok(())
    } else {
        Err(format!("points to the host {host}, which is not allowed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn root() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("toolgate-within-{:08x}", fastrand::u32(..)));
        std::fs::create_dir_all(dir.join("docs")).unwrap();
        dir.canonicalize().unwrap()
    }

    #[test]
    fn paths_stay_inside_the_root() {
        let root = root();
        let outside = std::env::temp_dir().join(format!("toolgate-outside-{:08x}", fastrand::u32(..)));
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
            std::os::unix::fs::symlink(outside.join("sub"), root.join("sublink")).unwrap();
            std::os::unix::fs::symlink(outside.join("not-yet"), root.join("dangling")).unwrap();
            std::os::unix::fs::symlink("docs", root.join("inner")).unwrap();
        }
        for ok in ["docs/a.md", "./docs/../docs/b.md", "new/deep/file.txt", "%2e%2e/x", "..file", "docs/...", "inner/a.md", "inner/../docs"] {
            assert_eq!(within(&root, ok), Ok(()), "{ok}");
        }
        assert_eq!(within(&root, &root.join("docs/a.md").to_string_lossy()), Ok(()), "absolute inside");
        for (bad, why) in [
            ("../x", "outside the allowed folder"),
            ("docs/../../x", "outside"),
            ("/etc/passwd", "outside"),
            ("escape/secret", "symbolic link"),
            ("escape", "symbolic link"),
            // `..` after a link climbs from where the link leads, as the kernel does.
            ("sublink/../secret.txt", "symbolic link"),
            // A dangling link is where writing would create its target.
            ("dangling", "symbolic link"),
            ("new/../../x", "does not exist"),
            ("a\0b", "NUL"),
            ("", "empty"),
        ] {
            let err = within(&root, bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn hosts_are_read_as_a_browser_reads_them() {
        let hosts = vec!["example.com".to_string(), "*.docs.rs".to_string()];
        for ok in ["https://example.com/a", "http://EXAMPLE.com:8080/", "https://serde.docs.rs/x", "https://example.com./"] {
            assert_eq!(host_allowed(&hosts, ok), Ok(()), "{ok}");
        }
        for bad in [
            "https://example.com@evil.com/",
            "https://evil.com/example.com",
            "https://example.com.evil.com/",
            "https://docs.rs/",
            "ftp://example.com/",
            "file:///etc/passwd",
            "//example.com/x",
            "https://xn--exmple-cua.com/",
            "https://[::1]/",
            "https://127.0.0.1/",
        ] {
            assert!(host_allowed(&hosts, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn declarations_and_arguments() {
        let root = root();
        let checks = declared(Some(&json!({"arg": "/file/path", "root": root.to_string_lossy()})), Some(&json!([{"arg": "url", "hosts": ["Example.com"]}]))).unwrap();
        assert!(run(&checks, &json!({"file": {"path": "docs/x"}, "url": "https://example.com"})).is_ok());
        assert!(run(&checks, &json!({})).is_ok(), "an absent argument is the schema's business");
        let err = run(&checks, &json!({"file": {"path": "../x"}})).unwrap_err();
        assert!(err.starts_with("the path in \"/file/path\" is outside the allowed folder; use a path inside"), "{err}");
        assert!(run(&checks, &json!({"url": 5})).unwrap_err().contains("must be a string"));
        assert!(declared(Some(&json!({"arg": "p", "root": "/no/such/root"})), None).unwrap_err().contains("cannot be resolved"));
        assert!(declared(None, Some(&json!({"arg": "u", "hosts": []}))).is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
