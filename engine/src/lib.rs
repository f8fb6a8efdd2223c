//! The Python binding: `hyperdata_sidecar_engine.LineEngine`, one coarse call per read with the
//! GIL released for the work (held only when the records go to a Python `produce`, the
//! `PythonProducer` of the tailer's unit tests). Errors in the data come back as values (dead
//! letters, an undecided line); only a call out of turn raises.

mod engine;
mod inspect;
mod murmur2;
mod poller;
mod producer;
mod python_producer;
mod reading;
mod records;
mod sequencer;
mod splitter;

use pyo3::exceptions::{PyBaseException, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::engine::{Collector, Misuse, Sink, Unterminated, Verdict};
use crate::inspect::CoinLocation;
use crate::producer::{Deliveries, ProduceError, Refusal};
use crate::python_producer::{PythonProducer, PythonSink};
use crate::records::{Batch as RecordBatch, Destination, Record, RecordBuilder, RecordRef};
use crate::sequencer::{SeqState, Sequencer};
use crate::splitter::LineSplitter;

/// The sequencer state as Python holds it: (block or None, next seq_in_block, regression epoch).
type PySeqState = (Option<i128>, u64, u64);

/// Where a call hands its records: the engine's producer (a cycle's `Deliveries`), or a Python
/// `produce` callable (`PythonProducer`); None keeps them in the batch.
#[derive(FromPyObject)]
enum Target<'py> {
    Engine(Bound<'py, Deliveries>),
    Python(Bound<'py, PythonProducer>),
}

#[pyclass(module = "hyperdata_sidecar_engine")]
struct LineEngine {
    engine: engine::LineEngine,
    data_topic: String,
    data_partitions: u32,
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
            data_partitions,
            dlq_topic,
        })
    }

    /// Splits `chunk` and hands over its complete lines up to the first undecided one: to `sink`
    /// (a cycle's `Deliveries` on the engine's producer, or a `PythonProducer`), or kept in the
    /// batch when None. `chunk`: `bytes`, or the `Chunk` of `read_chunk` (not copied on the way).
    #[pyo3(signature = (chunk, sink=None))]
    fn feed(&mut self, py: Python<'_>, chunk: &Bound<'_, PyAny>, sink: Option<Target<'_>>) -> PyResult<Batch> {
        let chunk = match chunk.cast::<reading::Chunk>() {
            Ok(read) => read.get().bytes(),
            Err(_) => chunk.cast::<PyBytes>()?.as_bytes(),
        };
        self.run(py, sink, |engine, sink| engine.feed(chunk, sink))
    }

    /// Hands over the rest of the read after `Batch.refusal` (once there is room, or the hold is over).
    #[pyo3(signature = (sink=None))]
    fn proceed(&mut self, py: Python<'_>, sink: Option<Target<'_>>) -> PyResult<Batch> {
        self.run(py, sink, |engine, sink| engine.proceed(sink))
    }

    /// The verdict "good line" on `Batch.undecided`; hands over the rest of the read.
    #[pyo3(signature = (coin, block_number, n_events, sink=None))]
    fn accept(
        &mut self,
        py: Python<'_>,
        coin: &str,
        block_number: i128,
        n_events: u64,
        sink: Option<Target<'_>>,
    ) -> PyResult<Batch> {
        let verdict = Verdict::Good {
            coin: coin.as_bytes().to_vec(),
            block_number,
            n_events,
        };
        self.run(py, sink, |engine, sink| engine.resume(verdict, sink))
    }

    /// The verdict "dead letter" on `Batch.undecided`; hands over the rest of the read.
    #[pyo3(signature = (reason, detail, sink=None))]
    fn reject(&mut self, py: Python<'_>, reason: String, detail: String, sink: Option<Target<'_>>) -> PyResult<Batch> {
        let verdict = Verdict::Rejected { reason, detail };
        self.run(py, sink, |engine, sink| engine.resume(verdict, sink))
    }

    /// The dead letter of the unterminated tail `flush_partial` gave (`data`, or for an oversize
    /// line its `length` and `sha256`), handed to `sink` (kept in the batch when None). The offset
    /// is not moved: `flush_partial` moved it; a refused record is sent by calling again.
    #[pyo3(signature = (offset, length, data=None, sha256=None, sink=None))]
    fn write_unterminated(
        &mut self,
        py: Python<'_>,
        offset: u64,
        length: u64,
        data: Option<Vec<u8>>,
        sha256: Option<String>,
        sink: Option<Target<'_>>,
    ) -> PyResult<Batch> {
        let item = match (data, sha256) {
            (Some(data), None) if data.len() as u64 == length => Unterminated::Line { offset, data },
            (None, Some(sha256)) => Unterminated::Oversize { offset, length, sha256 },
            _ => {
                return Err(PyValueError::new_err(
                    "give the line's data (of its length), or the sha256 of an oversize line",
                ))
            }
        };
        self.run(py, sink, |engine, sink| Ok(engine.write_unterminated(&item, sink)))
    }

    /// The `rejected` dead letter for the data record of the line at `offset` (`value`) that the
    /// broker refused for good with `error` (`detail`, its words), as (topic, partition, key, value, headers).
    fn rejection<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        value: &[u8],
        error: &str,
        detail: &str,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let record = self.engine.rejection(offset, value, error, detail);
        record_tuple(py, &record, &self.data_topic, &self.dlq_topic)
    }

    /// The held unterminated tail, the offset moved past it; None if nothing is held.
    fn flush_partial(&mut self) -> PyResult<Option<HeldLine>> {
        let item = self.engine.flush_partial().map_err(misuse)?;
        Ok(item.map(|item| match item {
            Unterminated::Line { offset, data } => HeldLine {
                offset,
                length: data.len() as u64,
                data: Some(data),
                sha256: None,
            },
            Unterminated::Oversize { offset, length, sha256 } => HeldLine {
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

    /// Lines of the current read not handed over yet (after a refusal).
    #[getter]
    fn waiting(&self) -> usize {
        self.engine.waiting()
    }
}

impl LineEngine {
    /// Runs `step` into `target`: with the GIL released into the engine's producer or a collector,
    /// with it held into a Python producer.
    fn run<F>(&mut self, py: Python<'_>, target: Option<Target<'_>>, step: F) -> PyResult<Batch>
    where
        F: FnOnce(&mut engine::LineEngine, &mut dyn Sink) -> Result<RecordBatch, Misuse> + Send,
    {
        let engine = &mut self.engine;
        let mut raised = None;
        let batch = match &target {
            Some(Target::Engine(deliveries)) => {
                let deliveries = deliveries.get();
                py.detach(|| step(engine, &mut ProducerSink { deliveries }))
            }
            Some(Target::Python(producer)) => {
                let producer = producer.get();
                if producer.data_partitions() != self.data_partitions as usize {
                    return Err(PyValueError::new_err(format!(
                        "the PythonProducer has {} data delivery callbacks for {} partitions",
                        producer.data_partitions(),
                        self.data_partitions
                    )));
                }
                let mut sink = PythonSink::new(py, producer, &self.data_topic, &self.dlq_topic);
                let batch = step(engine, &mut sink);
                if let Some(uncaught) = sink.uncaught() {
                    return Err(uncaught);
                }
                raised = sink.raised.map(|error| error.into_value(py));
                batch
            }
            None => py.detach(|| {
                let mut collector = Collector::default();
                step(engine, &mut collector).map(|mut batch| {
                    batch.records = collector.records;
                    batch
                })
            }),
        }
        .map_err(misuse)?;
        Ok(Batch {
            batch,
            raised,
            data_topic: self.data_topic.clone(),
            dlq_topic: self.dlq_topic.clone(),
        })
    }
}

/// Queues each record on the producer, its report counted in its group of the cycle.
struct ProducerSink<'a> {
    deliveries: &'a Deliveries,
}

impl Sink for ProducerSink<'_> {
    fn send(&mut self, record: &RecordRef<'_>) -> Result<(), Refusal> {
        let deliveries = self.deliveries;
        let (topic, group) = match record.destination {
            Destination::Data => (&deliveries.data_topic, deliveries.data_group(record.partition)),
            Destination::DeadLetters => (&deliveries.dlq_topic, Some(deliveries.dlq_group())),
        };
        match group {
            Some(group) => deliveries.producer().send(topic, record, group),
            None => Err(Refusal::Refused(producer::ErrorInfo::new(
                "_UNKNOWN_PARTITION",
                format!("the cycle has no partition {} of its data topic", record.partition),
            ))),
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
    /// The exception a Python producer's refusal raised, handed back as it was.
    raised: Option<Py<PyBaseException>>,
    data_topic: String,
    dlq_topic: String,
}

#[pymethods]
impl Batch {
    /// Every record in file order as (topic, partition, key, value, headers).
    fn records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let records = PyList::empty(py);
        for record in &self.batch.records {
            records.append(record_tuple(py, record, &self.data_topic, &self.dlq_topic)?)?;
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

    /// Why the read stopped before its end: "full" (the producer's queue), or the exception of the
    /// client's refusal (what a Python producer raised; the engine's producer's `ProduceError`);
    /// None when every line up to `undecided` (or the end) was handed over.
    #[getter]
    fn refusal(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        Ok(match (&self.batch.refusal, &self.raised) {
            (None, _) => None,
            (Some(Refusal::QueueFull), _) => Some(PyString::new(py, "full").into_any().unbind()),
            (Some(Refusal::Refused(_)), Some(raised)) => Some(raised.clone_ref(py).into_any()),
            (Some(Refusal::Refused(info)), None) => {
                let error = producer::client_error(py, info.clone())?;
                Some(ProduceError::new_err((error,)).into_value(py).into_any())
            }
        })
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

/// `record` as `produce` would receive it: (topic, partition, key, value, headers).
fn record_tuple<'py>(py: Python<'py>, record: &Record, data_topic: &str, dlq_topic: &str) -> PyResult<Bound<'py, PyTuple>> {
    let topic = match record.destination {
        Destination::Data => data_topic,
        Destination::DeadLetters => dlq_topic,
    };
    let headers = PyList::empty(py);
    for (name, value) in &record.headers {
        headers.append((name.as_str(), PyBytes::new(py, value)))?;
    }
    PyTuple::new(
        py,
        [
            topic.into_pyobject(py)?.into_any(),
            record.partition.into_pyobject(py)?.into_any(),
            PyBytes::new(py, &record.key).into_any(),
            PyBytes::new(py, &record.value).into_any(),
            headers.into_any(),
        ],
    )
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
    module.add_class::<reading::Sha256>()?;
    module.add_class::<reading::Chunk>()?;
    module.add_function(wrap_pyfunction!(reading::read_chunk, module)?)?;
    module.add_class::<Batch>()?;
    module.add_class::<HeldLine>()?;
    module.add_class::<producer::Producer>()?;
    module.add_class::<producer::Deliveries>()?;
    module.add_class::<producer::PyClientError>()?;
    module.add_class::<producer::Delivered>()?;
    // What only the tests use, apart: `testing.PythonProducer` runs the engine on a Python
    // `produce` (the tailer's unit tests' fake broker); the sidecar never does.
    let testing = PyModule::new(module.py(), "testing")?;
    testing.add_class::<PythonProducer>()?;
    module.add_submodule(&testing)?;
    module.add("ProduceError", module.py().get_type::<producer::ProduceError>())?;
    module.add("TransactionError", module.py().get_type::<producer::TransactionError>())?;
    module.add_function(wrap_pyfunction!(partition_for, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
