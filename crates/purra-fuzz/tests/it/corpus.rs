//! Replays the committed fuzz corpora (`fuzz/corpus/TARGET/*`) through the same checks the fuzz
//! targets run, so CI exercises every seed and every fixed crash on stable.

use std::path::Path;

#[test]
fn every_corpus_file_passes_its_target_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for (target, check) in purra_fuzz::TARGETS {
        let dir = root.join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{target} has no corpus");
        for file in files {
            let data = std::fs::read(&file).expect("a corpus file");
            // The file name says which input failed if a check panics.
            eprintln!("{target}: {}", file.display());
            check(&data);
        }
    }
}
