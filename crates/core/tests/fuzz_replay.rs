//! The fuzz targets (fuzz/targets.rs) on stable: every input of the committed corpus, and every crash a fuzzing run
//! found (fuzz/regressions), replayed through the same checks `cargo fuzz run` makes.

use std::fs;
use std::path::Path;

#[path = "../../../fuzz/targets.rs"]
mod targets;

#[test]
fn every_corpus_input_and_every_crash_found_holds() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    for (name, target) in targets::ALL {
        let mut replayed = 0;
        for folder in ["corpus", "regressions"] {
            let Ok(entries) = fs::read_dir(fuzz.join(folder).join(name)) else { continue };
            for entry in entries {
                let path = entry.expect("a corpus entry").path();
                let input = fs::read(&path).expect("a corpus file");
                if let Err(panic) = std::panic::catch_unwind(|| target(&input)) {
                    let why = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
                    panic!("{name}: {} fails: {}", path.display(), why.unwrap_or_default());
                }
                replayed += 1;
            }
        }
        assert!(replayed > 0, "{name} has a corpus");
    }
}
