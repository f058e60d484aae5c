//! Runs every program in `examples/` as a test: each example is included as
//! a module and its `main` (which asserts its own outcome) is called.
//!
//! `every_example_is_covered` fails when a file in `examples/` is missing
//! from the list below, so a new example cannot go untested.

macro_rules! examples {
    ($($name:ident => $file:literal,)*) => {
        $(
            #[allow(unreachable_pub, dead_code)]
            #[path = $file]
            mod $name;

            #[test]
            fn $name() {
                $name::main().expect(concat!("example ", stringify!($name), " failed"));
            }
        )*

        /// The example files the tests above run.
        const COVERED: &[&str] = &[$(stringify!($name)),*];
    };
}

examples! {
    actor_checkpoint => "../../examples/actor_checkpoint.rs",
    file_persisted => "../../examples/file_persisted.rs",
    order_fulfilment => "../../examples/order_fulfilment.rs",
    quick_start => "../../examples/quick_start.rs",
    replicated_kv => "../../examples/replicated_kv.rs",
    typed_views => "../../examples/typed_views.rs",
    workflow => "../../examples/workflow.rs",
}

#[test]
fn every_example_is_covered() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("examples directory") {
        let path = entry.expect("directory entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            found.push(stem);
        } else if path.is_dir() {
            panic!(
                "{} is a directory example; add it to tests/local/examples.rs and this check",
                path.display()
            );
        }
    }
    found.sort();
    let uncovered: Vec<_> = found
        .iter()
        .filter(|f| !COVERED.contains(&f.as_str()))
        .collect();
    assert!(
        uncovered.is_empty(),
        "examples not run by tests/local/examples.rs: {uncovered:?}"
    );
    assert!(!found.is_empty(), "no examples found in {}", dir.display());
}
