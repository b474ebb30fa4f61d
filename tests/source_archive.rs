//! Safe extraction: hostile archives are refused with typed errors that name
//! the archive and the entry, and nothing lands outside the destination.

mod support;

use clusterstack::source::archive::{ArchiveError, ExtractLimits, extract_tgz, extract_tgz_from};
use support::releases::{RawEntry, raw_tar, tgz};
use tar::EntryType;

fn extract_bytes(
    name: &str,
    bytes: &[u8],
    limits: &ExtractLimits,
) -> (tempfile::TempDir, Result<clusterstack::source::archive::ExtractStats, ArchiveError>) {
    let tmp = tempfile::tempdir().unwrap();
    let archive = tmp.path().join(name);
    std::fs::write(&archive, bytes).unwrap();
    let dest = tmp.path().join("root").join("out");
    let result = extract_tgz(&archive, &dest, limits);
    (tmp, result)
}

fn file(name: &'static str, data: &'static [u8]) -> RawEntry<'static> {
    RawEntry { name, kind: EntryType::Regular, link: None, data }
}

#[test]
fn extracts_files_and_directories() {
    let bytes = tgz(&[("chart/Chart.yaml", b"name: x\n"), ("chart/templates/a.yaml", b"kind: A\n")]);
    let (tmp, result) = extract_bytes("good.tgz", &bytes, &ExtractLimits::default());
    let stats = result.unwrap();
    assert_eq!(stats.files, 2);
    assert_eq!(stats.bytes, 16);
    let out = tmp.path().join("root/out");
    assert_eq!(std::fs::read_to_string(out.join("chart/Chart.yaml")).unwrap(), "name: x\n");
    assert_eq!(std::fs::read_to_string(out.join("chart/templates/a.yaml")).unwrap(), "kind: A\n");
}

#[test]
fn parent_dir_traversal_is_refused() {
    let bytes = raw_tar(&[file("ok.txt", b"fine"), file("../escape.txt", b"owned")]);
    let (tmp, result) = extract_bytes("evil.tgz", &bytes, &ExtractLimits::default());
    match result {
        Err(ArchiveError::ParentDir { archive, entry }) => {
            assert_eq!(archive, "evil.tgz");
            assert_eq!(entry, "../escape.txt");
        }
        other => panic!("expected ParentDir, got {other:?}"),
    }
    assert!(!tmp.path().join("root/escape.txt").exists());
}

#[test]
fn nested_parent_dir_is_refused() {
    let bytes = raw_tar(&[file("a/b/../../../x", b"owned")]);
    let (_tmp, result) = extract_bytes("evil.tgz", &bytes, &ExtractLimits::default());
    assert!(
        matches!(result, Err(ArchiveError::ParentDir { ref entry, .. }) if entry == "a/b/../../../x"),
        "{result:?}"
    );
}

#[test]
fn absolute_path_is_refused() {
    let bytes = raw_tar(&[file("/tmp/clusterstack-absolute-test", b"owned")]);
    let (_tmp, result) = extract_bytes("abs.tgz", &bytes, &ExtractLimits::default());
    match result {
        Err(err @ ArchiveError::AbsolutePath { .. }) => {
            assert_eq!(err.entry(), Some("/tmp/clusterstack-absolute-test"));
            assert!(err.to_string().contains("abs.tgz"), "{err}");
        }
        other => panic!("expected AbsolutePath, got {other:?}"),
    }
}

#[test]
fn symlink_escaping_the_root_is_refused_before_anything_follows_it() {
    let bytes = raw_tar(&[
        RawEntry { name: "link", kind: EntryType::Symlink, link: Some("../../outside"), data: b"" },
        file("link/pwned.txt", b"owned"),
    ]);
    let (tmp, result) = extract_bytes("link.tgz", &bytes, &ExtractLimits::default());
    match result {
        Err(ArchiveError::Link { archive, entry, kind, target }) => {
            assert_eq!(
                (archive.as_str(), entry.as_str(), kind, target.as_str()),
                ("link.tgz", "link", "symbolic link", "../../outside")
            );
        }
        other => panic!("expected Link, got {other:?}"),
    }
    assert!(!tmp.path().join("outside").exists());
    assert!(std::fs::symlink_metadata(tmp.path().join("root/out/link")).is_err(), "no link may be created");
}

#[test]
fn hardlink_is_refused() {
    let bytes = raw_tar(&[RawEntry { name: "hard", kind: EntryType::Link, link: Some("/etc/passwd"), data: b"" }]);
    let (_tmp, result) = extract_bytes("hard.tgz", &bytes, &ExtractLimits::default());
    assert!(
        matches!(result, Err(ArchiveError::Link { ref entry, kind: "hard link", ref target, .. }) if entry == "hard" && target == "/etc/passwd"),
        "{result:?}"
    );
}

#[test]
fn devices_and_fifos_are_refused() {
    for (kind, expected) in
        [(EntryType::Fifo, "fifo"), (EntryType::Char, "character device"), (EntryType::Block, "block device")]
    {
        let bytes = raw_tar(&[RawEntry { name: "dev", kind, link: None, data: b"" }]);
        let (tmp, result) = extract_bytes("dev.tgz", &bytes, &ExtractLimits::default());
        match result {
            Err(ArchiveError::SpecialFile { archive, entry, kind }) => {
                assert_eq!((archive.as_str(), entry.as_str(), kind), ("dev.tgz", "dev", expected));
            }
            other => panic!("expected SpecialFile for {expected}, got {other:?}"),
        }
        assert!(!tmp.path().join("root/out/dev").exists());
    }
}

#[test]
fn a_bomb_over_the_total_cap_fails_at_the_entry_that_crosses_it() {
    // 3 MiB of zeros per file compresses to a few KiB.
    let zeros = vec![0u8; 3 << 20];
    let bytes = tgz(&[("a", &zeros), ("b", &zeros), ("c", &zeros)]);
    assert!(bytes.len() < 100_000, "the bomb should be small: {}", bytes.len());
    let limits = ExtractLimits { max_total_bytes: 5 << 20, ..ExtractLimits::default() };
    let (tmp, result) = extract_bytes("bomb.tgz", &bytes, &limits);
    match result {
        Err(ArchiveError::TotalTooLarge { archive, entry, limit }) => {
            assert_eq!((archive.as_str(), entry.as_str(), limit), ("bomb.tgz", "b", 5 << 20));
        }
        other => panic!("expected TotalTooLarge, got {other:?}"),
    }
    assert!(!tmp.path().join("root/out/c").exists(), "extraction must stop at the cap");
}

#[test]
fn a_file_over_the_single_file_cap_is_refused() {
    let big = vec![7u8; 2 << 20];
    let bytes = tgz(&[("small", b"x"), ("big", &big)]);
    let limits = ExtractLimits { max_file_bytes: 1 << 20, ..ExtractLimits::default() };
    let (_tmp, result) = extract_bytes("big.tgz", &bytes, &limits);
    assert!(
        matches!(result, Err(ArchiveError::FileTooLarge { ref entry, limit, .. }) if entry == "big" && limit == 1 << 20),
        "{result:?}"
    );
}

#[test]
fn too_many_entries_are_refused() {
    let names: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
    let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"x"[..])).collect();
    let limits = ExtractLimits { max_entries: 10, ..ExtractLimits::default() };
    let (_tmp, result) = extract_bytes("many.tgz", &tgz(&files), &limits);
    assert!(
        matches!(result, Err(ArchiveError::TooManyEntries { ref entry, limit: 10, .. }) if entry == "f10"),
        "{result:?}"
    );
}

#[test]
fn huge_metadata_records_are_capped_while_streaming() {
    // Pax and GNU long-name records are not files: their size is in no file
    // count, and a tar reader buffers them in memory. The decompressed stream
    // itself is capped, so an 8 MiB record fails at about the 1 MiB cap.
    let record = vec![b'A'; 8 << 20];
    for kind in [EntryType::XHeader, EntryType::GNULongName] {
        let bytes = raw_tar(&[RawEntry { name: "meta", kind, link: None, data: &record }, file("x", b"x")]);
        let limits = ExtractLimits { max_total_bytes: 1 << 20, max_entries: 10, ..ExtractLimits::default() };
        let tmp = tempfile::tempdir().unwrap();
        let result = extract_tgz_from("records.tgz", &bytes[..], tmp.path(), &limits);
        assert!(
            matches!(result, Err(ArchiveError::TotalTooLarge { ref archive, limit, .. }) if archive == "records.tgz" && limit == 1 << 20),
            "{kind:?}: {result:?}"
        );
    }
}

#[test]
fn corrupt_gzip_is_a_typed_error() {
    let mut bytes = tgz(&[("a", b"hello")]);
    bytes.truncate(bytes.len() / 2);
    let (_tmp, result) = extract_bytes("cut.tgz", &bytes, &ExtractLimits::default());
    match result {
        Err(err @ ArchiveError::Corrupt { .. }) => assert!(err.to_string().contains("cut.tgz"), "{err}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}
