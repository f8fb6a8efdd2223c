//! A sink that hands each record to a Python `produce` callable, exactly as `RecordWriter` calls
//! it: `produce(topic, value, key, partition, on_delivery, None, 0, headers)`, with the GIL held.
//!
//! For tests only (exported as `hyperdata_sidecar_engine.testing.PythonProducer`): the engine's
//! own `Producer` is the sidecar's path; this one runs the same engine against any
//! confluent-kafka-shaped `produce` (the tailer's unit tests give it their fake broker's), with
//! the cycle's Python delivery callbacks. What `produce` raises is a refusal, judged as the
//! reference writer judges it: `BufferError` is the queue being full; any other exception is the
//! client refusing the record, kept so that Python gets that very exception back.

use pyo3::exceptions::{PyBufferError, PyException};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use crate::engine::Sink;
use crate::producer::{ErrorInfo, Refusal};
use crate::records::{Destination, RecordRef};

/// A Python `produce` callable and one cycle's delivery callbacks (`CycleAcks`): `data[p]` for the
/// records of data partition `p`, `dlq` for dead letters.
#[pyclass(module = "hyperdata_sidecar_engine.testing", frozen)]
pub struct PythonProducer {
    produce: Py<PyAny>,
    data: Vec<Py<PyAny>>,
    dlq: Py<PyAny>,
}

#[pymethods]
impl PythonProducer {
    #[new]
    fn new(produce: Py<PyAny>, data: Vec<Py<PyAny>>, dlq: Py<PyAny>) -> Self {
        PythonProducer { produce, data, dlq }
    }
}

impl PythonProducer {
    /// How many data partitions it has a delivery callback for.
    pub fn data_partitions(&self) -> usize {
        self.data.len()
    }
}

/// One engine call's sink on a [`PythonProducer`]: the GIL is held for the whole call.
pub struct PythonSink<'a, 'py> {
    py: Python<'py>,
    producer: &'a PythonProducer,
    data_topic: Bound<'py, PyString>,
    dlq_topic: Bound<'py, PyString>,
    /// The exception of the client's refusal, for the caller to hand back to Python as it was raised.
    pub raised: Option<PyErr>,
}

impl<'a, 'py> PythonSink<'a, 'py> {
    /// `producer` must have a callback for every data partition the engine routes to.
    pub fn new(py: Python<'py>, producer: &'a PythonProducer, data_topic: &str, dlq_topic: &str) -> Self {
        PythonSink {
            py,
            producer,
            data_topic: PyString::new(py, data_topic),
            dlq_topic: PyString::new(py, dlq_topic),
            raised: None,
        }
    }

    fn produce(&self, record: &RecordRef<'_>) -> PyResult<()> {
        let py = self.py;
        let (topic, on_delivery) = match record.destination {
            Destination::Data => (&self.data_topic, &self.producer.data[record.partition as usize]),
            Destination::DeadLetters => (&self.dlq_topic, &self.producer.dlq),
        };
        let headers = PyList::empty(py);
        for (name, value) in record.headers {
            headers.append((*name, PyBytes::new(py, value)))?;
        }
        let args = (
            topic,
            PyBytes::new(py, record.value),
            PyBytes::new(py, record.key),
            record.partition,
            on_delivery.bind(py),
            py.None(),
            0,
            headers,
        );
        self.producer.produce.call1(py, args)?;
        Ok(())
    }
}

impl Sink for PythonSink<'_, '_> {
    fn send(&mut self, record: &RecordRef<'_>) -> Result<(), Refusal> {
        let error = match self.produce(record) {
            Ok(()) => return Ok(()),
            Err(error) => error,
        };
        let py = self.py;
        if error.is_instance_of::<PyBufferError>(py) {
            return Err(Refusal::QueueFull);
        }
        let info = ErrorInfo::new(
            error
                .get_type(py)
                .name()
                .map_or_else(|_| "Exception".to_owned(), |name| name.to_string()),
            error.value(py).to_string(),
        );
        self.raised = Some(error);
        Err(Refusal::Refused(info))
    }
}

impl PythonSink<'_, '_> {
    /// The exception to raise instead of returning the batch: one that is not an `Exception`
    /// (`KeyboardInterrupt`, `SystemExit`), which the reference writer does not catch either.
    pub fn uncaught(&mut self) -> Option<PyErr> {
        let py = self.py;
        match &self.raised {
            Some(error) if !error.is_instance_of::<PyException>(py) => self.raised.take(),
            _ => None,
        }
    }
}
