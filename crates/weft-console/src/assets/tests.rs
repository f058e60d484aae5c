//! What can be checked without a browser: the table matches the files, the
//! page and modules reference only embedded files (so nothing is fetched
//! from elsewhere), content types, and lookups that must find nothing.

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;

use super::{asset, asset_paths};

fn text(path: &str) -> &'static str {
    let (_, bytes) = asset(path).unwrap_or_else(|| panic!("{path} is not embedded"));
    std::str::from_utf8(bytes).unwrap_or_else(|e| panic!("{path} is not UTF-8: {e}"))
}

/// The values of `attr="..."` in an HTML document.
fn attribute_values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let needle = format!(" {attr}=\"");
    html.match_indices(&needle)
        .map(|(at, _)| {
            let rest = &html[at + needle.len()..];
            &rest[..rest.find('"').expect("attribute value closes")]
        })
        .collect()
}

/// The specifiers of `import ... from "..."` and `import "..."` lines in a
/// module (the console's modules keep one import per statement start).
fn imports(js: &str) -> Vec<&str> {
    js.lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with("import "))
        .map(|line| {
            let open = line.find('"').expect("import specifier is quoted");
            let rest = &line[open + 1..];
            &rest[..rest.find('"').expect("import specifier closes")]
        })
        .collect()
}

/// A module specifier resolved against the importing module's path.
fn resolve(from: &str, specifier: &str) -> String {
    let rel = specifier
        .strip_prefix("./")
        .unwrap_or_else(|| panic!("{from} imports {specifier:?}: only ./ siblings are embedded"));
    match from.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{rel}"),
        None => rel.to_owned(),
    }
}

/// The embedded paths a file refers to.
fn references(path: &str) -> Vec<String> {
    if path.ends_with(".html") {
        let html = text(path);
        let mut refs = attribute_values(html, "href");
        refs.extend(attribute_values(html, "src"));
        refs.into_iter()
            .map(|r| {
                r.strip_prefix("/console/")
                    .unwrap_or_else(|| panic!("{path} refers to {r:?}, outside /console/"))
                    .to_owned()
            })
            .collect()
    } else if path.ends_with(".js") {
        imports(text(path))
            .into_iter()
            .map(|s| resolve(path, s))
            .collect()
    } else {
        Vec::new()
    }
}

#[test]
fn the_page_is_served_for_the_root_and_its_name() {
    let (root_type, root) = asset("").expect("the root gives the page");
    let (named_type, named) = asset("index.html").expect("index.html gives the page");
    assert_eq!(root, named);
    assert_eq!(root_type, "text/html; charset=utf-8");
    assert_eq!(named_type, root_type);
    assert!(text("index.html").starts_with("<!doctype html>"));
}

#[test]
fn content_types_follow_the_file_kind() {
    for path in asset_paths() {
        let (content_type, bytes) = asset(path).unwrap();
        assert!(!bytes.is_empty(), "{path} is empty");
        let want = match path.rsplit_once('.').map(|(_, ext)| ext) {
            Some("html") => "text/html; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            Some("js") => "text/javascript; charset=utf-8",
            Some("svg") => "image/svg+xml",
            other => panic!("{path}: no content type known for {other:?}"),
        };
        assert_eq!(content_type, want, "{path}");
    }
}

#[test]
fn every_reference_is_embedded_and_every_file_is_referenced() {
    let mut reached = BTreeSet::from(["index.html".to_owned()]);
    let mut queue = VecDeque::from(["index.html".to_owned()]);
    while let Some(path) = queue.pop_front() {
        for r in references(&path) {
            assert!(
                asset(&r).is_some(),
                "{path} refers to {r}, which is not embedded"
            );
            if reached.insert(r.clone()) {
                queue.push_back(r);
            }
        }
    }
    let embedded: BTreeSet<String> = asset_paths().map(str::to_owned).collect();
    assert_eq!(reached, embedded, "embedded files no page or module uses");
}

#[test]
fn the_table_holds_exactly_the_files_under_assets() {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, base, out);
            } else {
                let rel = path.strip_prefix(base).unwrap();
                out.insert(rel.to_str().unwrap().replace('\\', "/"));
            }
        }
    }
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    let mut on_disk = BTreeSet::new();
    walk(&base, &base, &mut on_disk);
    let embedded: BTreeSet<String> = asset_paths().map(str::to_owned).collect();
    assert_eq!(
        on_disk, embedded,
        "a file under assets/ is not embedded, or the reverse"
    );
}

#[test]
fn nothing_is_loaded_from_outside_the_binary() {
    for path in asset_paths() {
        let body = text(path);
        for bad in [
            "@import",
            "url(",
            "<script src=\"http",
            "fetch(\"http",
            "//cdn",
        ] {
            assert!(!body.contains(bad), "{path} contains {bad:?}");
        }
    }
}

#[test]
fn every_element_a_module_looks_up_is_in_the_page() {
    let ids: BTreeSet<&str> = attribute_values(text("index.html"), "id")
        .into_iter()
        .collect();
    for path in asset_paths().filter(|p| p.ends_with(".js")) {
        let js = text(path);
        let by_id = js
            .match_indices("getElementById(\"")
            .map(|(at, m)| &js[at + m.len()..]);
        let by_selector = js
            .match_indices("querySelector(\"#")
            .map(|(at, m)| &js[at + m.len()..]);
        for rest in by_id.chain(by_selector) {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                .unwrap();
            let id = &rest[..end];
            assert!(
                ids.contains(id),
                "{path} looks up #{id}, which index.html lacks"
            );
        }
    }
}

#[test]
fn unknown_and_escaping_paths_find_nothing() {
    for path in [
        "missing.js",
        "/index.html",
        "../Cargo.toml",
        "js/../index.html",
        "js/",
        "index.html?v=1",
        "INDEX.HTML",
        "assets/index.html",
    ] {
        assert!(asset(path).is_none(), "{path:?} found something");
    }
}
