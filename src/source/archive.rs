//! Safe extraction of `.tgz` release assets.
//!
//! Release tarballs come from the network, so extraction trusts nothing in
//! them: absolute paths, `..` components, links of any kind, device and fifo
//! entries are rejected, and the uncompressed size, the number of entries and
//! each file's size are capped while streaming, so a decompression bomb fails
//! after reading at most the cap. Links are rejected outright rather than
//! resolved: cluster-stack bundles never need them, and getting link
//! containment right is where extractors usually go wrong.

use std::cell::Cell;
use std::fs;
use std::io::{self, BufReader, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use flate2::read::GzDecoder;
use tar::EntryType;

/// Default cap on the total uncompressed bytes of one archive: 256 MiB.
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 256 * 1024 * 1024;
/// Default cap on the number of entries of one archive.
pub const DEFAULT_MAX_ENTRIES: u64 = 10_000;
/// Default cap on the size of one file in an archive: 64 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Caps applied while extracting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtractLimits {
    /// Total bytes of file content, and (with an allowance for tar headers)
    /// of the decompressed stream.
    pub max_total_bytes: u64,
    /// Number of entries (files, directories, everything).
    pub max_entries: u64,
    /// Bytes of one file.
    pub max_file_bytes: u64,
}

impl Default for ExtractLimits {
    fn default() -> Self {
        Self {
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            max_entries: DEFAULT_MAX_ENTRIES,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
        }
    }
}

/// What an extraction wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExtractStats {
    pub files: u64,
    pub directories: u64,
    /// Bytes of file content written.
    pub bytes: u64,
}

/// Why an archive was rejected. Every variant names the archive and, where
/// there is one, the entry.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("archive {archive}: entry {entry:?} has an absolute path")]
    AbsolutePath { archive: String, entry: String },
    #[error("archive {archive}: entry {entry:?} contains a '..' component")]
    ParentDir { archive: String, entry: String },
    #[error("archive {archive}: entry {entry:?} is a {kind} to {target:?}; links are not allowed in release archives")]
    Link { archive: String, entry: String, kind: &'static str, target: String },
    #[error("archive {archive}: entry {entry:?} is a {kind}; only files and directories are allowed")]
    SpecialFile { archive: String, entry: String, kind: &'static str },
    #[error("archive {archive}: more than {limit} entries (at entry {entry:?})")]
    TooManyEntries { archive: String, entry: String, limit: u64 },
    #[error("archive {archive}: entry {entry:?} is larger than the per-file limit of {limit} bytes")]
    FileTooLarge { archive: String, entry: String, limit: u64 },
    #[error("archive {archive}: more than {limit} uncompressed bytes (at entry {entry:?})")]
    TotalTooLarge { archive: String, entry: String, limit: u64 },
    #[error("archive {archive}: unreadable (gzip or tar is corrupt) at entry {entry:?}")]
    Corrupt {
        archive: String,
        entry: String,
        #[source]
        source: io::Error,
    },
    #[error("archive {archive}: could not write entry {entry:?} to {path}")]
    Write {
        archive: String,
        entry: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not open archive {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl ArchiveError {
    /// The entry the error is about, when there is one.
    pub fn entry(&self) -> Option<&str> {
        match self {
            ArchiveError::AbsolutePath { entry, .. }
            | ArchiveError::ParentDir { entry, .. }
            | ArchiveError::Link { entry, .. }
            | ArchiveError::SpecialFile { entry, .. }
            | ArchiveError::TooManyEntries { entry, .. }
            | ArchiveError::FileTooLarge { entry, .. }
            | ArchiveError::TotalTooLarge { entry, .. }
            | ArchiveError::Corrupt { entry, .. }
            | ArchiveError::Write { entry, .. } => Some(entry),
            ArchiveError::Open { .. } => None,
        }
    }
}

/// Extracts the `.tgz` file `archive` into `dest` (created if missing).
///
/// `dest` should be a fresh directory: the checks assume nothing in it is a
/// link, which holds because extraction never creates one.
pub fn extract_tgz(archive: &Path, dest: &Path, limits: &ExtractLimits) -> Result<ExtractStats, ArchiveError> {
    let file = fs::File::open(archive).map_err(|source| ArchiveError::Open { path: archive.to_path_buf(), source })?;
    let name = archive.file_name().map_or_else(|| archive.display().to_string(), |n| n.to_string_lossy().into_owned());
    extract_tgz_from(&name, BufReader::with_capacity(64 * 1024, file), dest, limits)
}

/// Extracts a gzip-compressed tar stream read from `reader`; `name` names the
/// archive in errors.
pub fn extract_tgz_from<R: Read>(
    name: &str,
    reader: R,
    dest: &Path,
    limits: &ExtractLimits,
) -> Result<ExtractStats, ArchiveError> {
    // The decompressed stream is capped too, not only the file contents the
    // headers announce: padding, long-name and pax records are data as well.
    // Allowance: three 512-byte blocks per entry plus the end-of-archive padding.
    let stream_cap = limits
        .max_total_bytes
        .saturating_add(limits.max_entries.saturating_add(1).saturating_mul(1536))
        .saturating_add(20 * 512);
    let exceeded = Rc::new(Cell::new(false));
    let counted = CappedReader { inner: GzDecoder::new(reader), read: 0, cap: stream_cap, exceeded: exceeded.clone() };
    let mut tar = tar::Archive::new(counted);
    let mut stats = ExtractStats::default();
    let mut entry_count: u64 = 0;
    let mut last_entry = String::from("(start of archive)");

    let archive = name.to_string();
    let corrupt = |entry: &str, source: io::Error, exceeded: &Cell<bool>| {
        if exceeded.get() {
            ArchiveError::TotalTooLarge {
                archive: archive.clone(),
                entry: entry.to_string(),
                limit: limits.max_total_bytes,
            }
        } else {
            ArchiveError::Corrupt { archive: archive.clone(), entry: entry.to_string(), source }
        }
    };

    let entries = tar.entries().map_err(|e| corrupt(&last_entry, e, &exceeded))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| corrupt(&format!("after {last_entry}"), e, &exceeded))?;
        let raw_path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        last_entry = raw_path.clone();
        let kind = entry.header().entry_type();
        if matches!(kind, EntryType::XGlobalHeader | EntryType::XHeader) {
            continue;
        }
        entry_count += 1;
        if entry_count > limits.max_entries {
            return Err(ArchiveError::TooManyEntries { archive, entry: raw_path, limit: limits.max_entries });
        }
        let relative = safe_relative_path(name, &raw_path)?;
        let err_link = |kind: &'static str, entry: &tar::Entry<'_, _>| {
            let target = entry.link_name_bytes().map(|t| String::from_utf8_lossy(&t).into_owned()).unwrap_or_default();
            ArchiveError::Link { archive: name.to_string(), entry: raw_path.clone(), kind, target }
        };
        let special =
            |kind: &'static str| ArchiveError::SpecialFile { archive: name.to_string(), entry: raw_path.clone(), kind };
        match kind {
            EntryType::Symlink => return Err(err_link("symbolic link", &entry)),
            EntryType::Link => return Err(err_link("hard link", &entry)),
            EntryType::Char => return Err(special("character device")),
            EntryType::Block => return Err(special("block device")),
            EntryType::Fifo => return Err(special("fifo")),
            EntryType::GNUSparse => return Err(special("sparse file")),
            EntryType::Directory => {
                let Some(relative) = relative else { continue };
                let path = dest.join(&relative);
                fs::create_dir_all(&path).map_err(|source| ArchiveError::Write {
                    archive: name.to_string(),
                    entry: raw_path.clone(),
                    path: path.clone(),
                    source,
                })?;
                stats.directories += 1;
            }
            EntryType::Regular | EntryType::Continuous => {
                let Some(relative) = relative else {
                    return Err(special("file without a name"));
                };
                // Fail fast on what the header announces; the copy below
                // counts the bytes for real.
                let announced = entry.header().size().unwrap_or(0);
                if announced > limits.max_file_bytes {
                    return Err(ArchiveError::FileTooLarge {
                        archive: name.to_string(),
                        entry: raw_path,
                        limit: limits.max_file_bytes,
                    });
                }
                if stats.bytes.saturating_add(announced) > limits.max_total_bytes {
                    return Err(ArchiveError::TotalTooLarge {
                        archive: name.to_string(),
                        entry: raw_path,
                        limit: limits.max_total_bytes,
                    });
                }
                let path = dest.join(&relative);
                let write_err = |source| ArchiveError::Write {
                    archive: name.to_string(),
                    entry: raw_path.clone(),
                    path: path.clone(),
                    source,
                };
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent).map_err(write_err)?;
                }
                let file = fs::File::create(&path).map_err(write_err)?;
                let mut out = io::BufWriter::with_capacity(64 * 1024, file);
                let written =
                    copy_capped(&mut entry, &mut out, limits.max_file_bytes, limits.max_total_bytes - stats.bytes)
                        .map_err(|e| match e {
                            CopyError::File => ArchiveError::FileTooLarge {
                                archive: name.to_string(),
                                entry: raw_path.clone(),
                                limit: limits.max_file_bytes,
                            },
                            CopyError::Total => ArchiveError::TotalTooLarge {
                                archive: name.to_string(),
                                entry: raw_path.clone(),
                                limit: limits.max_total_bytes,
                            },
                            CopyError::Read(e) => corrupt(&raw_path, e, &exceeded),
                            CopyError::Write(e) => write_err(e),
                        })?;
                out.flush().map_err(write_err)?;
                stats.bytes += written;
                stats.files += 1;
            }
            EntryType::GNULongName | EntryType::GNULongLink => continue,
            _ => return Err(special("entry of an unsupported type")),
        }
    }
    Ok(stats)
}

/// The entry's path below the root, or `None` for the root itself (`./`).
fn safe_relative_path(archive: &str, raw: &str) -> Result<Option<PathBuf>, ArchiveError> {
    let mut out = PathBuf::new();
    for component in Path::new(raw).components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(ArchiveError::ParentDir { archive: archive.to_string(), entry: raw.to_string() });
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(ArchiveError::AbsolutePath { archive: archive.to_string(), entry: raw.to_string() });
            }
        }
    }
    Ok(if out.as_os_str().is_empty() { None } else { Some(out) })
}

enum CopyError {
    File,
    Total,
    Read(io::Error),
    Write(io::Error),
}

fn copy_capped(from: &mut impl Read, to: &mut impl Write, file_cap: u64, total_left: u64) -> Result<u64, CopyError> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut written: u64 = 0;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(written),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyError::Read(e)),
        };
        written += n as u64;
        if written > file_cap {
            return Err(CopyError::File);
        }
        if written > total_left {
            return Err(CopyError::Total);
        }
        to.write_all(&buf[..n]).map_err(CopyError::Write)?;
    }
}

/// Counts decompressed bytes and fails once `cap` is passed.
struct CappedReader<R> {
    inner: R,
    read: u64,
    cap: u64,
    exceeded: Rc<Cell<bool>>,
}

impl<R: Read> Read for CappedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read > self.cap {
            self.exceeded.set(true);
            return Err(io::Error::other("decompressed size limit exceeded"));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_normalised_and_checked() {
        assert_eq!(safe_relative_path("a.tgz", "./x/./y").unwrap(), Some(PathBuf::from("x/y")));
        assert_eq!(safe_relative_path("a.tgz", "./").unwrap(), None);
        assert!(matches!(safe_relative_path("a.tgz", "x/../../y"), Err(ArchiveError::ParentDir { .. })));
        assert!(matches!(safe_relative_path("a.tgz", "/etc/passwd"), Err(ArchiveError::AbsolutePath { .. })));
    }
}
