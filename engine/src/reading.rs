//! Reading an hour file's new bytes for the line engine, the file's running sha256 kept on the way,
//! as `digest.py`'s `read_chunk` and `RunningDigest` do in Python.
//!
//! One read is one call with the GIL released: the bytes go from the file into a buffer Python
//! never copies (`Chunk`, fed to `LineEngine.feed` as it is), and each piece is hashed right after
//! it was read, while it is still in the CPU's cache, instead of in a second pass over the read.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use sha2::{Digest, Sha256 as Sha256State};

/// Bytes read (and hashed) at a time: well inside a core's L2 cache.
const PIECE_BYTES: usize = 256 * 1024;

/// A running sha256 (hashlib's `update`/`hexdigest`), which `read_chunk` updates without the GIL.
#[pyclass(module = "hyperdata_sidecar_engine")]
#[derive(Default)]
pub struct Sha256 {
    state: Sha256State,
}

#[pymethods]
impl Sha256 {
    #[new]
    fn new() -> Self {
        Sha256::default()
    }

    /// Hashes `data` (the GIL released).
    fn update(&mut self, py: Python<'_>, data: &[u8]) {
        let state = &mut self.state;
        py.detach(|| state.update(data));
    }

    /// The sha256 of everything hashed so far, in lower-case hex; hashing may go on.
    fn hexdigest(&self) -> String {
        self.state
            .clone()
            .finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}

/// The bytes of one read, owned by the engine's side (a buffer Python does not copy).
#[pyclass(module = "hyperdata_sidecar_engine", frozen)]
pub struct Chunk {
    bytes: Vec<u8>,
}

impl Chunk {
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

#[pymethods]
impl Chunk {
    fn __len__(&self) -> usize {
        self.bytes.len()
    }

    /// A copy as `bytes` (tests; the tailer hands the chunk itself to the engine).
    fn to_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Reads up to `length` bytes of `path` at `offset` (fewer at the end of the file), hashing them
/// into `digest` when given. Only a regular file is read: a symlink is not followed and a pipe not
/// waited on, and either is refused with `OSError`, as `digest.open_regular` refuses them.
#[pyfunction]
#[pyo3(signature = (path, offset, length, digest=None))]
pub fn read_chunk(
    py: Python<'_>,
    path: PathBuf,
    offset: u64,
    length: usize,
    mut digest: Option<PyRefMut<'_, Sha256>>,
) -> PyResult<Chunk> {
    let state = digest.as_mut().map(|digest| &mut digest.state);
    py.detach(|| read_hashed(&path, offset, length, state))
        .map(|bytes| Chunk { bytes })
        .map_err(|error| os_error(py, error, &path))
}

fn read_hashed(path: &Path, offset: u64, length: usize, mut digest: Option<&mut Sha256State>) -> Result<Vec<u8>, ReadError> {
    let file = open_regular(path)?;
    let mut bytes = vec![0; length];
    let mut filled = 0;
    while filled < length {
        let end = length.min(filled + PIECE_BYTES);
        let read = match file.read_at(&mut bytes[filled..end], offset + filled as u64) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(ReadError::Io(error)),
        };
        if let Some(digest) = digest.as_deref_mut() {
            digest.update(&bytes[filled..filled + read]);
        }
        filled += read;
    }
    bytes.truncate(filled);
    Ok(bytes)
}

enum ReadError {
    Io(io::Error),
    /// A link (not followed), pipe, directory or device where the hour file was.
    NotRegular,
}

impl From<io::Error> for ReadError {
    fn from(error: io::Error) -> Self {
        ReadError::Io(error)
    }
}

fn open_regular(path: &Path) -> Result<File, ReadError> {
    let file = File::options()
        .read(true)
        // O_NONBLOCK: a pipe in the file's place is not waited on (a regular file's reads ignore it).
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.file_type().is_file() {
        return Err(ReadError::NotRegular);
    }
    Ok(file)
}

/// The error as Python's own `OSError(errno, strerror, filename)`, which picks the subclass
/// (`FileNotFoundError`, …) as the standard library's file functions do.
fn os_error(py: Python<'_>, error: ReadError, path: &Path) -> PyErr {
    match error {
        ReadError::NotRegular => PyOSError::new_err((libc::EINVAL, "not a regular file", path.to_path_buf())),
        ReadError::Io(error) => match error.raw_os_error() {
            Some(errno) => match strerror(py, errno) {
                Ok(message) => PyOSError::new_err((errno, message, path.to_path_buf())),
                Err(error) => error,
            },
            None => PyOSError::new_err(error.to_string()),
        },
    }
}

/// The system's words for `errno`, as Python's own errors carry them (`os.strerror`).
fn strerror(py: Python<'_>, errno: i32) -> PyResult<String> {
    py.import("os")?.getattr("strerror")?.call1((errno,))?.extract()
}
