//! The Python binding: `hyperdata_sidecar_engine.LineEngine`, one coarse call per read with the
//! GIL released for the work. Errors in the data come back as values (dead letters, an undecided
//! line); only a call out of turn raises.

mod engine;
mod inspect;
mod murmur2;
mod records;
mod sequencer;
mod splitter;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::engine::{Misuse, Verdict};
use crate::inspect::CoinLocation;
use crate::records::{Batch as RecordBatch, Destination, RecordBuilder};
use crate::sequencer::{SeqState, Sequencer};
use crate::splitter::{Item, LineSplitter};

/// The sequencer state as Python holds it: (block or None, next seq_in_block, regression epoch).
type PySeqState = (Option<i128>, u64, u64);

#[pyclass(module = "hyperdata_sidecar_engine")]
struct LineEngine {
    engine: engine::LineEngine,
    data_topic: String,
    dlq_topic: String,
}

#[pymethods]
impl LineEngine {
    #[new]
    #[pyo3(signature = (*, table, coin_location, data_topic, data_partitions, dlq_topic, dlq_partition, source, offset, seq, first_block, last_block, late_tag, max_line_bytes))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        table: &str,
        coin_location: &str,
        data_topic: String,
        data_partitions: u32,
        dlq_topic: String,
        dlq_partition: u32,
        source: String,
        offset: u64,
        seq: PySeqState,
        first_block: Option<i128>,
        last_block: Option<i128>,
        late_tag: Vec<u8>,
        max_line_bytes: u64,
    ) -> PyResult<Self> {
        let location = CoinLocation::from_name(coin_location)
            .ok_or_else(|| PyValueError::new_err(format!("unknown coin_location {coin_location:?}")))?;
        if data_partitions == 0 {
            return Err(PyValueError::new_err("data_partitions must be >= 1"));
        }
        let (block, next_seq, epoch) = seq;
        let sequencer = Sequencer::new(table, late_tag, SeqState { block, next_seq, epoch }, first_block, last_block);
        let builder = RecordBuilder::new(table, source, data_partitions, dlq_partition);
        let engine = engine::LineEngine::new(location, LineSplitter::new(offset, max_line_bytes), sequencer, builder);
        Ok(LineEngine {
            engine,
            data_topic,
            dlq_topic,
        })
    }

    /// Splits `chunk` and hands over its complete lines up to the first undecided one.
    fn feed(&mut self, py: Python<'_>, chunk: &[u8]) -> PyResult<Batch> {
        let engine = &mut self.engine;
        let batch = py.detach(|| engine.feed(chunk)).map_err(misuse)?;
        Ok(self.batch(batch))
    }

    /// The verdict "good line" on `Batch.undecided`; hands over the rest of the read.
    fn accept(&mut self, py: Python<'_>, coin: &str, block_number: i128, n_events: u64) -> PyResult<Batch> {
        let verdict = Verdict::Good {
            coin: coin.as_bytes().to_vec(),
            block_number,
            n_events,
        };
        self.resume(py, verdict)
    }

    /// The verdict "dead letter" on `Batch.undecided`; hands over the rest of the read.
    fn reject(&mut self, py: Python<'_>, reason: String, detail: String) -> PyResult<Batch> {
        self.resume(py, Verdict::Rejected { reason, detail })
    }

    /// The held unterminated tail, the offset moved past it; None if nothing is held.
    fn flush_partial(&mut self) -> PyResult<Option<HeldLine>> {
        let item = self.engine.flush_partial().map_err(misuse)?;
        Ok(item.map(|item| match item {
            Item::Line { offset, data } => HeldLine {
                offset,
                length: data.len() as u64,
                data: Some(data),
                sha256: None,
            },
            Item::Oversize { offset, length, sha256 } => HeldLine {
                offset,
                length,
                data: None,
                sha256: Some(sha256),
            },
        }))
    }

    #[getter]
    fn offset(&self) -> u64 {
        self.engine.offset()
    }

    #[getter]
    fn seq(&self) -> PySeqState {
        let state = self.engine.sequencer.state();
        (state.block, state.next_seq, state.epoch)
    }

    #[getter]
    fn first_block(&self) -> Option<i128> {
        self.engine.sequencer.first_block
    }

    #[getter]
    fn last_block(&self) -> Option<i128> {
        self.engine.sequencer.last_block
    }

    #[getter]
    fn held_bytes(&self) -> u64 {
        self.engine.held_bytes()
    }
}

impl LineEngine {
    fn resume(&mut self, py: Python<'_>, verdict: Verdict) -> PyResult<Batch> {
        let engine = &mut self.engine;
        let batch = py.detach(|| engine.resume(verdict)).map_err(misuse)?;
        Ok(self.batch(batch))
    }

    fn batch(&self, batch: RecordBatch) -> Batch {
        Batch {
            batch,
            data_topic: self.data_topic.clone(),
            dlq_topic: self.dlq_topic.clone(),
        }
    }
}

fn misuse(misuse: Misuse) -> PyErr {
    PyRuntimeError::new_err(misuse.to_string())
}

/// What one call handed over; the records stay Rust values until asked for.
#[pyclass(module = "hyperdata_sidecar_engine", frozen)]
struct Batch {
    batch: RecordBatch,
    data_topic: String,
    dlq_topic: String,
}

#[pymethods]
impl Batch {
    /// Every record in file order as (topic, partition, key, value, headers).
    fn records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let records = PyList::empty(py);
        for record in &self.batch.records {
            let topic = match record.destination {
                Destination::Data => &self.data_topic,
                Destination::DeadLetters => &self.dlq_topic,
            };
            let headers = PyList::empty(py);
            for (name, value) in &record.headers {
                headers.append((*name, PyBytes::new(py, value)))?;
            }
            let key = PyBytes::new(py, &record.key);
            let value = PyBytes::new(py, &record.value);
            records.append(PyTuple::new(
                py,
                [
                    topic.into_pyobject(py)?.into_any(),
                    record.partition.into_pyobject(py)?.into_any(),
                    key.into_any(),
                    value.into_any(),
                    headers.into_any(),
                ],
            )?)?;
        }
        Ok(records)
    }

    #[getter]
    fn lines(&self) -> u64 {
        self.batch.lines
    }

    #[getter]
    fn dlq(&self) -> u64 {
        self.batch.dlq
    }

    #[getter]
    fn produced(&self) -> u64 {
        self.batch.produced()
    }

    /// (offset, previous block, block, epoch) of each block regression.
    #[getter]
    fn regressions(&self) -> Vec<(u64, i128, i128, u64)> {
        self.batch
            .regressions
            .iter()
            .map(|r| (r.offset, r.previous, r.block, r.epoch))
            .collect()
    }

    /// (reason, offset) of each dead letter.
    #[getter]
    fn dead_letters(&self) -> Vec<(String, u64)> {
        self.batch.dead_letters.clone()
    }

    #[getter]
    fn last_line<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.batch.last_line.as_ref().map(|line| PyBytes::new(py, line))
    }

    /// (offset, line) of the line waiting for Python's verdict, or None when the read is done.
    #[getter]
    fn undecided<'py>(&self, py: Python<'py>) -> Option<(u64, Bound<'py, PyBytes>)> {
        self.batch
            .undecided
            .as_ref()
            .map(|(offset, line)| (*offset, PyBytes::new(py, line)))
    }
}

/// The unterminated last line of a finalized file: its bytes, or for an oversize one its sha256.
#[pyclass(module = "hyperdata_sidecar_engine", frozen)]
struct HeldLine {
    #[pyo3(get)]
    offset: u64,
    #[pyo3(get)]
    length: u64,
    data: Option<Vec<u8>>,
    #[pyo3(get)]
    sha256: Option<String>,
}

#[pymethods]
impl HeldLine {
    /// The line's bytes; None for an oversize line (only its length and sha256 were kept).
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.data.as_ref().map(|data| PyBytes::new(py, data))
    }
}

/// The partition Kafka's default partitioner gives `key` among `partitions`.
#[pyfunction]
fn partition_for(key: &[u8], partitions: u32) -> PyResult<u32> {
    if partitions == 0 {
        return Err(PyValueError::new_err("partitions must be >= 1"));
    }
    Ok(murmur2::partition_for(key, partitions))
}

#[pymodule]
fn hyperdata_sidecar_engine(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<LineEngine>()?;
    module.add_class::<Batch>()?;
    module.add_class::<HeldLine>()?;
    module.add_function(wrap_pyfunction!(partition_for, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
