//! The engine's Kafka producer: librdkafka (rust-rdkafka's bundled copy) behind the subset of
//! confluent-kafka's `Producer` the data plane uses, plus delivery accounting that needs no Python.
//!
//! Two kinds of record go through it, in one librdkafka producer (so idempotence and the order of
//! a partition hold across both):
//! - the records of a cycle, produced by the line engine with the GIL released: each carries its
//!   (topic, partition) group of the cycle's [`Deliveries`], and its delivery report is counted in
//!   Rust on the producer's events thread ([`crate::poller`]: counts, failures by position, first
//!   and last offset);
//! - single records produced from Python (`produce`, positional like confluent-kafka's, for
//!   redelivery and seals): their `on_delivery(err, msg)` callbacks are queued and called by
//!   `poll()` on the thread that polls, as confluent-kafka does.
//!
//! Client errors, logs and statistics are queued the same way and handed to the `error_cb`,
//! `logger` and `stats_cb` of the configuration by `poll()`.
//!
//! With a `transactional.id` it is a transactional producer, driven by confluent-kafka's four calls
//! (`init_transactions`, `begin_transaction`, `commit_transaction`, `abort_transaction`); both kinds
//! of record then belong to the transaction open when they are produced, and their reports are
//! counted as before (a record reported delivered is written, not yet committed). A failed call
//! raises `TransactionError`, whose `ClientError` says what may follow: call again (`retriable()`),
//! abort first (`txn_requires_abort()`), or give the producer up (`fatal()`).

use std::collections::HashMap;
use std::ffi::c_void;
use std::ffi::CStr;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyBufferError, PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use rdkafka::bindings as rdsys;
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, FromClientConfigAndContext, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, Producer as _, ProducerContext, PurgeConfig};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::util::Timeout;

use crate::poller::Poller;
use crate::records::{Destination, RecordRef};

create_exception!(
    hyperdata_sidecar_engine,
    ProduceError,
    PyException,
    "The producer refused a record; args[0] is the ClientError."
);

create_exception!(
    hyperdata_sidecar_engine,
    TransactionError,
    PyException,
    "A transactional call failed; args[0] is the ClientError (fatal(), retriable(), txn_requires_abort())."
);

/// An error as confluent-kafka's `KafkaError` shows it: `name()`, `str()`, `fatal()`, and for a
/// transactional call's error `retriable()` and `txn_requires_abort()` (false for any other).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorInfo {
    pub name: String,
    pub detail: String,
    pub fatal: bool,
    /// The call that failed may be made again (a transactional call that timed out).
    pub retriable: bool,
    /// The transaction must be aborted before another begins (a record of it failed for good).
    pub txn_requires_abort: bool,
}

impl ErrorInfo {
    /// An error that is neither fatal, retriable nor abortable.
    pub fn new(name: impl Into<String>, detail: impl Into<String>) -> Self {
        ErrorInfo {
            name: name.into(),
            detail: detail.into(),
            fatal: false,
            retriable: false,
            txn_requires_abort: false,
        }
    }

    fn of(error: &KafkaError) -> Self {
        if let KafkaError::Transaction(error) = error {
            return ErrorInfo {
                name: error.name(),
                detail: error.string(),
                fatal: error.is_fatal(),
                retriable: error.is_retriable(),
                txn_requires_abort: error.txn_requires_abort(),
            };
        }
        match error.rdkafka_error_code() {
            Some(code) => ErrorInfo {
                fatal: code == RDKafkaErrorCode::Fatal,
                ..ErrorInfo::new(error_name(code), code.to_string())
            },
            None => ErrorInfo::new("_INVALID_ARG", error.to_string()),
        }
    }
}

/// What a librdkafka call returning an error object (null: none) did, the object destroyed.
///
/// # Safety
/// `error` is null or an error object the caller owns and does not use afterwards.
unsafe fn outcome(error: *mut rdsys::rd_kafka_error_t) -> Result<(), ErrorInfo> {
    if error.is_null() {
        return Ok(());
    }
    let text = |text: *const std::ffi::c_char| CStr::from_ptr(text).to_string_lossy().into_owned();
    let info = ErrorInfo {
        name: text(rdsys::rd_kafka_error_name(error)),
        detail: text(rdsys::rd_kafka_error_string(error)),
        fatal: rdsys::rd_kafka_error_is_fatal(error) != 0,
        retriable: rdsys::rd_kafka_error_is_retriable(error) != 0,
        txn_requires_abort: rdsys::rd_kafka_error_txn_requires_abort(error) != 0,
    };
    rdsys::rd_kafka_error_destroy(error);
    Err(info)
}

/// librdkafka's name of `code` (`MSG_SIZE_TOO_LARGE`, `_UNKNOWN_PARTITION`, ...), as confluent-kafka's
/// `KafkaError.name()` gives it.
fn error_name(code: RDKafkaErrorCode) -> String {
    match RDKafkaRespErr::try_from(code as i32) {
        // SAFETY: rd_kafka_err2name returns a static NUL-terminated string for every code.
        Ok(err) => unsafe { CStr::from_ptr(rdsys::rd_kafka_err2name(err)) }
            .to_string_lossy()
            .into_owned(),
        Err(_) => format!("{code:?}"),
    }
}

/// A client error for Python: the error object of a failed delivery report, of `error_cb`, of a
/// refused `produce()` (`ProduceError.args[0]`) and of a failed transactional call
/// (`TransactionError.args[0]`).
#[pyclass(module = "hyperdata_sidecar_engine", frozen, name = "ClientError")]
pub struct PyClientError {
    info: ErrorInfo,
}

#[pymethods]
impl PyClientError {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn str(&self) -> &str {
        &self.info.detail
    }

    fn fatal(&self) -> bool {
        self.info.fatal
    }

    fn retriable(&self) -> bool {
        self.info.retriable
    }

    fn txn_requires_abort(&self) -> bool {
        self.info.txn_requires_abort
    }

    fn __repr__(&self) -> String {
        format!("ClientError({}, {:?})", self.info.name, self.info.detail)
    }
}

/// A delivered record as confluent-kafka's `Message` shows it to a delivery callback.
#[pyclass(module = "hyperdata_sidecar_engine", frozen)]
pub struct Delivered {
    topic: String,
    partition: i32,
    offset: i64,
}

#[pymethods]
impl Delivered {
    fn topic(&self) -> &str {
        &self.topic
    }

    fn partition(&self) -> i32 {
        self.partition
    }

    fn offset(&self) -> i64 {
        self.offset
    }
}

/// The delivery reports of one (topic, partition) of a cycle. librdkafka reports a partition's
/// records in the order they were produced, so the i-th report is the group's i-th record.
#[derive(Default)]
pub struct Group {
    state: Mutex<GroupState>,
    /// A record produced from Python: its `on_delivery(err, msg)`, called by `poll()`.
    callback: Option<Py<PyAny>>,
}

#[derive(Default, Clone)]
pub struct GroupState {
    pub reported: u64,
    /// (position in the group, error) of each failed record.
    pub failures: Vec<(u64, ErrorInfo)>,
    pub first: Option<i64>,
    pub last: Option<i64>,
}

impl Group {
    fn report(&self, result: Result<i64, ErrorInfo>) {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match result {
            Ok(offset) => {
                state.first.get_or_insert(offset);
                state.last = Some(offset);
            }
            Err(error) => {
                let position = state.reported;
                state.failures.push((position, error));
            }
        }
        state.reported += 1;
    }

    pub fn snapshot(&self) -> GroupState {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    pub fn reported(&self) -> u64 {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).reported
    }
}

/// Something for Python to be told at the next `poll()`.
enum Event {
    Delivery {
        group: Arc<Group>,
        topic: String,
        partition: i32,
        result: Result<i64, ErrorInfo>,
    },
    Error(ErrorInfo),
    Log {
        level: RDKafkaLogLevel,
        facility: String,
        message: String,
    },
    Stats(String),
}

/// Runs on librdkafka's threads (and the engine's events thread, [`crate::poller`]): counts, queues, never calls Python.
#[derive(Default)]
pub struct Context {
    /// Reports counted in Rust since the last `poll()` (they wake the waiters on the Python side).
    reports: AtomicU64,
    events: Mutex<Vec<Event>>,
}

impl Context {
    fn push(&self, event: Event) {
        self.events
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(event);
    }
}

impl ClientContext for Context {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        self.push(Event::Log {
            level,
            facility: fac.to_owned(),
            message: log_message.to_owned(),
        });
    }

    fn stats_raw(&self, statistics: &[u8]) {
        self.push(Event::Stats(String::from_utf8_lossy(statistics).into_owned()));
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let mut info = ErrorInfo::of(&error);
        info.detail = reason.to_owned();
        self.push(Event::Error(info));
    }
}

impl ProducerContext for Context {
    /// Every record carries its group (`Arc::into_raw` at produce, taken back here).
    type DeliveryOpaque = Arc<Group>;

    fn delivery(&self, delivery_result: &DeliveryResult<'_>, group: Self::DeliveryOpaque) {
        if group.callback.is_none() {
            group.report(match delivery_result {
                Ok(message) => Ok(message.offset()),
                Err((error, _)) => Err(ErrorInfo::of(error)),
            });
            self.reports.fetch_add(1, Ordering::Release);
            return;
        }
        let (result, topic, partition) = match delivery_result {
            Ok(message) => (Ok(message.offset()), message.topic(), message.partition()),
            Err((error, message)) => (Err(ErrorInfo::of(error)), message.topic(), message.partition()),
        };
        self.push(Event::Delivery {
            group,
            topic: topic.to_owned(),
            partition,
            result,
        });
    }
}

/// A librdkafka topic handle: the hot path names its topic by handle, not by name (which librdkafka
/// would look up, under a lock, for every record).
pub struct TopicHandle(*mut rdsys::rd_kafka_topic_t);

// SAFETY: librdkafka's topic handles are reference-counted and thread-safe; this one is only
// produced to and destroyed once, when the last Arc of it goes (before the client: see Producer).
unsafe impl Send for TopicHandle {}
unsafe impl Sync for TopicHandle {}

impl Drop for TopicHandle {
    fn drop(&mut self) {
        // SAFETY: made by rd_kafka_topic_new, destroyed once.
        unsafe { rdsys::rd_kafka_topic_destroy(self.0) };
    }
}

/// Why a record was not queued (nothing of it was).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The producer's queue is full: let reports come in, then try again.
    QueueFull,
    /// The client refused the record (an unknown partition or topic, ...).
    Refused(ErrorInfo),
}

/// librdkafka's producer, for Python and for the line engine.
#[pyclass(module = "hyperdata_sidecar_engine", frozen)]
pub struct Producer {
    /// Declared before `inner`: the handles are destroyed before the client (fields drop in order).
    topics: Mutex<HashMap<String, Arc<TopicHandle>>>,
    /// Kept for its thread, which serves the client's events; declared before `inner` too, so the
    /// thread stops before the client is destroyed.
    _poller: Poller,
    inner: Arc<BaseProducer<Context>>,
    client_id: String,
    error_cb: Option<Py<PyAny>>,
    stats_cb: Option<Py<PyAny>>,
    logger: Option<Py<PyAny>>,
}

impl Producer {
    /// The handle of `topic`, made the first time it is asked for.
    pub fn topic(&self, topic: &str) -> Result<Arc<TopicHandle>, Refusal> {
        let mut topics = self.topics.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(handle) = topics.get(topic) {
            return Ok(Arc::clone(handle));
        }
        let name = std::ffi::CString::new(topic).map_err(|_| refused("_INVALID_ARG", "a topic name with a NUL byte"))?;
        // SAFETY: a valid client and NUL-terminated name; a null configuration takes the defaults.
        let handle = unsafe { rdsys::rd_kafka_topic_new(self.inner.client().native_ptr(), name.as_ptr(), ptr::null_mut()) };
        if handle.is_null() {
            // SAFETY: reads the calling thread's last error, set by rd_kafka_topic_new.
            let code = RDKafkaErrorCode::from(unsafe { rdsys::rd_kafka_last_error() });
            return Err(Refusal::Refused(ErrorInfo::of(&KafkaError::MessageProduction(code))));
        }
        let handle = Arc::new(TopicHandle(handle));
        topics.insert(topic.to_owned(), Arc::clone(&handle));
        Ok(handle)
    }

    /// Queues `record` on `topic` (copied: nothing of it is kept); its report goes to `group`.
    pub fn send(&self, topic: &TopicHandle, record: &RecordRef<'_>, group: &Arc<Group>) -> Result<(), Refusal> {
        let partition = if record.partition == ANY_PARTITION {
            -1
        } else {
            record.partition as i32
        };
        // SAFETY: the header list is handed to librdkafka on success and destroyed here otherwise;
        // the opaque is an Arc's raw pointer, taken back here on a refusal and by the delivery
        // report (rust-rdkafka's Arc IntoOpaque) otherwise; every slice outlives the call, which
        // copies them (RD_KAFKA_MSG_F_COPY).
        unsafe {
            let headers = rdsys::rd_kafka_headers_new(record.headers.len());
            for (name, value) in record.headers {
                rdsys::rd_kafka_header_add(
                    headers,
                    name.as_ptr().cast(),
                    name.len() as isize,
                    value.as_ptr().cast(),
                    value.len() as isize,
                );
            }
            let opaque = Arc::into_raw(Arc::clone(group)) as *mut c_void;
            let error = rdsys::rd_kafka_producev(
                self.inner.client().native_ptr(),
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_RKT,
                topic.0,
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_PARTITION,
                partition,
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_MSGFLAGS,
                rdsys::RD_KAFKA_MSG_F_COPY,
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_VALUE,
                record.value.as_ptr() as *mut c_void,
                record.value.len(),
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_KEY,
                record.key.as_ptr() as *const c_void,
                record.key.len(),
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_OPAQUE,
                opaque,
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_HEADERS,
                headers,
                rdsys::rd_kafka_vtype_t::RD_KAFKA_VTYPE_END,
            );
            if error == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                return Ok(());
            }
            drop(Arc::from_raw(opaque as *const Group));
            rdsys::rd_kafka_headers_destroy(headers);
            Err(refusal(RDKafkaErrorCode::from(error)))
        }
    }
}

/// A record produced from Python without a partition: librdkafka's partitioner picks one.
pub const ANY_PARTITION: u32 = u32::MAX;

/// The longest `purge()` waits for the purged records' reports.
const PURGE_WAIT: Duration = Duration::from_secs(5);

fn refusal(code: RDKafkaErrorCode) -> Refusal {
    match code {
        RDKafkaErrorCode::QueueFull => Refusal::QueueFull,
        code => Refusal::Refused(ErrorInfo::of(&KafkaError::MessageProduction(code))),
    }
}

fn refused(name: &str, detail: &str) -> Refusal {
    Refusal::Refused(ErrorInfo::new(name, detail))
}

/// confluent-kafka's timeout in seconds (negative: none) as librdkafka's; one beyond what
/// librdkafka's milliseconds hold (or not a number) is none too.
fn timeout_of(seconds: f64) -> Timeout {
    match Duration::try_from_secs_f64(seconds) {
        Ok(wait) if wait.as_millis() <= i32::MAX as u128 => Timeout::After(wait),
        _ => Timeout::Never,
    }
}

/// [`Timeout`] in librdkafka's milliseconds (-1: none).
fn timeout_ms(timeout: Timeout) -> i32 {
    match timeout {
        Timeout::After(wait) => wait.as_millis() as i32,
        Timeout::Never => -1,
    }
}

/// A transactional call's outcome for Python: `TransactionError(ClientError)` when it failed.
fn transaction_result(py: Python<'_>, result: Result<(), ErrorInfo>) -> PyResult<()> {
    result.map_err(|info| match Py::new(py, PyClientError { info }) {
        Ok(error) => TransactionError::new_err((error,)),
        Err(error) => error,
    })
}

/// Confluent-kafka's configuration values as librdkafka's strings (`True` → `true`).
fn config_value(value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(flag) = value.extract::<bool>() {
        if value.is_instance_of::<pyo3::types::PyBool>() {
            return Ok(if flag { "true" } else { "false" }.to_owned());
        }
    }
    Ok(value.str()?.to_str()?.to_owned())
}

/// librdkafka's `log_level` property (a syslog level, 6 by default) as rust-rdkafka's level.
fn log_level(configured: Option<&str>) -> RDKafkaLogLevel {
    match configured.and_then(|level| level.trim().parse::<u8>().ok()).unwrap_or(6) {
        0 => RDKafkaLogLevel::Emerg,
        1 => RDKafkaLogLevel::Alert,
        2 => RDKafkaLogLevel::Critical,
        3 => RDKafkaLogLevel::Error,
        4 => RDKafkaLogLevel::Warning,
        5 => RDKafkaLogLevel::Notice,
        6 => RDKafkaLogLevel::Info,
        _ => RDKafkaLogLevel::Debug,
    }
}

/// Python's logging level for a librdkafka syslog level, as confluent-kafka maps them.
fn python_level(level: RDKafkaLogLevel) -> i32 {
    match level {
        RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical => 50,
        RDKafkaLogLevel::Error => 40,
        RDKafkaLogLevel::Warning => 30,
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => 20,
        RDKafkaLogLevel::Debug => 10,
    }
}

#[pymethods]
impl Producer {
    /// Takes confluent-kafka's configuration dict: librdkafka properties, plus the Python
    /// callables `error_cb(error)`, `stats_cb(json)` and `logger` (a `logging.Logger`).
    #[new]
    fn new(config: &Bound<'_, PyDict>) -> PyResult<Self> {
        let mut client = ClientConfig::new();
        let (mut error_cb, mut stats_cb, mut logger) = (None, None, None);
        let mut client_id = "rdkafka".to_owned();
        for (key, value) in config.iter() {
            let key: String = key.extract()?;
            match key.as_str() {
                "error_cb" => error_cb = Some(value.unbind()),
                "stats_cb" => stats_cb = Some(value.unbind()),
                "logger" => logger = Some(value.unbind()),
                _ => {
                    let value = config_value(&value)?;
                    if key == "client.id" {
                        client_id = value.clone();
                    }
                    client.set(key, value);
                }
            }
        }
        // rust-rdkafka sets the client's level after creating it (from the log crate's, which is
        // off here): take the configuration's `log_level` instead, as confluent-kafka does.
        client.set_log_level(log_level(client.get("log_level")));
        let inner = BaseProducer::from_config_and_context(&client, Context::default())
            .map(Arc::new)
            .map_err(|error| PyValueError::new_err(format!("producer configuration: {error}")))?;
        let poller = Poller::start(Arc::clone(&inner))?;
        Ok(Producer {
            topics: Mutex::new(HashMap::new()),
            _poller: poller,
            inner,
            client_id,
            error_cb,
            stats_cb,
            logger,
        })
    }

    /// confluent-kafka's `produce(topic, value, key, partition, on_delivery, callback, timestamp,
    /// headers)`, positional (key and value required, the timestamp left to librdkafka). Raises
    /// `BufferError` when the queue is full and `ProduceError` when the client refuses the record;
    /// `on_delivery(err, msg)` is called by `poll()`.
    #[pyo3(signature = (topic, value, key, partition=-1, on_delivery=None, callback=None, timestamp=0, headers=None))]
    #[allow(clippy::too_many_arguments)]
    fn produce(
        &self,
        py: Python<'_>,
        topic: &str,
        value: &[u8],
        key: &[u8],
        partition: i32,
        on_delivery: Option<Py<PyAny>>,
        callback: Option<Py<PyAny>>,
        timestamp: i64,
        headers: Option<Vec<(String, Vec<u8>)>>,
    ) -> PyResult<()> {
        if timestamp != 0 {
            return Err(PyValueError::new_err(
                "the engine's producer leaves timestamps to librdkafka (pass 0)",
            ));
        }
        let group = Arc::new(Group {
            state: Mutex::default(),
            callback: on_delivery.or(callback),
        });
        let headers = headers.unwrap_or_default();
        let pairs: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_slice()))
            .collect();
        let record = RecordRef {
            destination: Destination::Data,
            partition: u32::try_from(partition).unwrap_or(ANY_PARTITION),
            key,
            value,
            headers: &pairs,
        };
        match self.topic(topic).and_then(|handle| self.send(&handle, &record, &group)) {
            Ok(()) => Ok(()),
            Err(Refusal::QueueFull) => Err(PyBufferError::new_err("the producer's queue is full")),
            Err(Refusal::Refused(info)) => Err(ProduceError::new_err((Py::new(py, PyClientError { info })?,))),
        }
    }

    /// Serves what happened since the last call, on this thread: delivery callbacks, client
    /// errors, logs, statistics. Waits up to `timeout` seconds for something. Returns how many
    /// events were served, delivery reports counted in Rust included.
    #[pyo3(signature = (timeout=0.0))]
    fn poll(&self, py: Python<'_>, timeout: f64) -> PyResult<u64> {
        let deadline = std::time::Instant::now() + Duration::from_secs_f64(timeout.max(0.0));
        loop {
            let served = self.serve(py)?;
            if served > 0 || std::time::Instant::now() >= deadline {
                return Ok(served);
            }
            py.detach(|| std::thread::sleep(Duration::from_millis(1)));
        }
    }

    /// Records queued, in flight or with a report not yet served.
    fn __len__(&self) -> usize {
        let queued = self.inner.in_flight_count().max(0) as usize;
        let unserved = self
            .inner
            .context()
            .events
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .filter(|event| matches!(event, Event::Delivery { .. }))
            .count();
        queued + unserved
    }

    /// Waits up to `timeout` seconds for every record to be reported; returns how many are left.
    #[pyo3(signature = (timeout=-1.0))]
    fn flush(&self, py: Python<'_>, timeout: f64) -> PyResult<usize> {
        let wait = timeout_of(timeout);
        // A timeout is not an error here: what is left is returned, as confluent-kafka does.
        let _ = py.detach(|| self.inner.flush(wait));
        self.serve(py)?;
        Ok(self.__len__())
    }

    /// Drops every record not yet delivered (their reports fail with `_PURGE_QUEUE`/`_PURGE_INFLIGHT`)
    /// and returns once those reports are counted, or queued for the next `poll()` (as after
    /// confluent-kafka's `purge()`, whose next `poll(0)` serves them), or after [`PURGE_WAIT`].
    fn purge(&self, py: Python<'_>) {
        py.detach(|| {
            self.inner.purge(PurgeConfig::default().queue().inflight());
            let deadline = std::time::Instant::now() + PURGE_WAIT;
            // librdkafka has queued the reports; the events thread hands them over at once.
            while self.inner.in_flight_count() > 0 && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
    }

    /// confluent-kafka's `init_transactions(timeout)`, once, before any other transactional call
    /// or record: registers the `transactional.id` with its coordinator, which fences every older
    /// producer of that id and ends its open transaction (aborted, or committed if its commit had
    /// begun). Waits up to `timeout` seconds (negative: twice `transaction.timeout.ms`). Raises
    /// `TransactionError`: retriable on a timeout or an unavailable coordinator (call it again; it
    /// goes on in the background), `_NOT_CONFIGURED` without a `transactional.id`.
    #[pyo3(signature = (timeout=-1.0))]
    fn init_transactions(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let timeout = timeout_of(timeout);
        let result = py.detach(|| self.inner.init_transactions(timeout));
        transaction_result(py, result.map_err(|error| ErrorInfo::of(&error)))
    }

    /// confluent-kafka's `begin_transaction()`: the records produced from now on (from Python and
    /// by the line engine) belong to a new transaction. Does not wait for the broker. Raises
    /// `TransactionError`: `_STATE` while a transaction is open or before `init_transactions`, the
    /// fatal error once there was one.
    fn begin_transaction(&self, py: Python<'_>) -> PyResult<()> {
        let result = self.inner.begin_transaction();
        transaction_result(py, result.map_err(|error| ErrorInfo::of(&error)))
    }

    /// confluent-kafka's `commit_transaction(timeout)`: waits for every record of the transaction
    /// to be reported, then for the coordinator to commit it; up to `timeout` seconds in all
    /// (negative: what is left of `transaction.timeout.ms`, as librdkafka recommends). Raises
    /// `TransactionError`: retriable on a timeout (call it again: the commit goes on in the
    /// background), `txn_requires_abort()` when a record failed for good (abort, then begin
    /// again), fatal when the producer was fenced.
    #[pyo3(signature = (timeout=-1.0))]
    fn commit_transaction(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let timeout = timeout_ms(timeout_of(timeout));
        let client = self.inner.client();
        // librdkafka's own commit, not rust-rdkafka's: that one first flushes with the same
        // timeout, so -1 would wait for the broker forever (librdkafka bounds it by the
        // transaction's time) and any other timeout twice over. The reports its flush waits for
        // are served by the events thread, as librdkafka requires of an event-queue producer.
        // SAFETY: a live client; the error object returned is ours, destroyed by `outcome`.
        let result = py.detach(|| unsafe { outcome(rdsys::rd_kafka_commit_transaction(client.native_ptr(), timeout)) });
        transaction_result(py, result)
    }

    /// confluent-kafka's `abort_transaction(timeout)`: drops the records not yet delivered (their
    /// reports fail with `_PURGE_QUEUE`/`_PURGE_INFLIGHT`) and has the coordinator abort the
    /// transaction, so that no `read_committed` consumer sees any of its records; up to `timeout`
    /// seconds (negative: what is left of `transaction.timeout.ms`). The way out of an abortable
    /// error. Raises `TransactionError`: retriable on a timeout (call it again), fatal when the
    /// producer was fenced.
    #[pyo3(signature = (timeout=-1.0))]
    fn abort_transaction(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let timeout = timeout_of(timeout);
        let result = py.detach(|| self.inner.abort_transaction(timeout));
        transaction_result(py, result.map_err(|error| ErrorInfo::of(&error)))
    }

    /// Asks the broker for `topic`'s metadata now (librdkafka then knows its partitions); the
    /// error as text, or None.
    #[pyo3(signature = (topic, timeout=10.0))]
    fn refresh_metadata(&self, py: Python<'_>, topic: &str, timeout: f64) -> Option<String> {
        let wait = Duration::from_secs_f64(timeout.max(0.0));
        let result = py.detach(|| self.inner.client().fetch_metadata(Some(topic), wait));
        match result {
            Err(error) => Some(error.to_string()),
            Ok(metadata) => metadata
                .topics()
                .iter()
                .find(|found| found.name() == topic)
                .and_then(|found| found.error())
                .map(|error| error_name(RDKafkaErrorCode::from(error))),
        }
    }
}

impl Producer {
    fn serve(&self, py: Python<'_>) -> PyResult<u64> {
        let counted = self.inner.context().reports.swap(0, Ordering::Acquire);
        let events = std::mem::take(
            &mut *self
                .inner
                .context()
                .events
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        let served = counted + events.len() as u64;
        for event in events {
            self.dispatch(py, event)?;
        }
        Ok(served)
    }

    fn dispatch(&self, py: Python<'_>, event: Event) -> PyResult<()> {
        match event {
            Event::Delivery {
                group,
                topic,
                partition,
                result,
            } => match result {
                Ok(offset) => {
                    let message = Py::new(
                        py,
                        Delivered {
                            topic,
                            partition,
                            offset,
                        },
                    )?;
                    if let Some(callback) = &group.callback {
                        callback.call1(py, (py.None(), message))?;
                    }
                }
                Err(info) => {
                    let message = Py::new(
                        py,
                        Delivered {
                            topic,
                            partition,
                            offset: -1,
                        },
                    )?;
                    if let Some(callback) = &group.callback {
                        callback.call1(py, (Py::new(py, PyClientError { info })?, message))?;
                    }
                }
            },
            Event::Error(mut info) => {
                // librdkafka's event of a fatal error carries its cause (`_FENCED`, ...) and a flag
                // that rust-rdkafka does not pass on: the client keeps the cause, and an error
                // event of it once the client has failed is that error.
                if let Some((code, reason)) = self.inner.client().fatal_error() {
                    if info.fatal || info.name == error_name(code) {
                        info = ErrorInfo {
                            fatal: true,
                            ..ErrorInfo::new(error_name(code), reason)
                        };
                    }
                }
                if let Some(error_cb) = &self.error_cb {
                    error_cb.call1(py, (Py::new(py, PyClientError { info })?,))?;
                }
            }
            Event::Log {
                level,
                facility,
                message,
            } => {
                if let Some(logger) = &self.logger {
                    let format = PyString::new(py, "%s [%s] %s");
                    logger.call_method1(
                        py,
                        "log",
                        (python_level(level), format, facility, self.client_id.as_str(), message),
                    )?;
                }
            }
            Event::Stats(json) => {
                if let Some(stats_cb) = &self.stats_cb {
                    stats_cb.call1(py, (json,))?;
                }
            }
        }
        Ok(())
    }
}

/// A failed record as Python sees it: (topic, partition, position in the group, error).
type FailureRow = (String, u32, u64, Py<PyClientError>);

/// The delivery reports of one cycle's records, by (topic, partition), counted in Rust.
#[pyclass(module = "hyperdata_sidecar_engine", frozen)]
pub struct Deliveries {
    producer: Py<Producer>,
    pub data_topic: Arc<TopicHandle>,
    pub dlq_topic: Arc<TopicHandle>,
    data_name: String,
    dlq_name: String,
    data: Vec<Arc<Group>>,
    dlq_partition: u32,
    dlq: Arc<Group>,
}

impl Deliveries {
    pub fn producer(&self) -> &Producer {
        self.producer.get()
    }

    pub fn data_group(&self, partition: u32) -> Option<&Arc<Group>> {
        self.data.get(partition as usize)
    }

    pub fn dlq_group(&self) -> &Arc<Group> {
        &self.dlq
    }

    fn groups(&self) -> impl Iterator<Item = (&str, u32, &Arc<Group>)> {
        let data = self
            .data
            .iter()
            .enumerate()
            .map(|(p, g)| (self.data_name.as_str(), p as u32, g));
        data.chain(std::iter::once((self.dlq_name.as_str(), self.dlq_partition, &self.dlq)))
    }
}

#[pymethods]
impl Deliveries {
    #[new]
    fn new(
        py: Python<'_>,
        producer: Py<Producer>,
        data_topic: String,
        data_partitions: u32,
        dlq_topic: String,
        dlq_partition: u32,
    ) -> PyResult<Self> {
        let handles = {
            let producer = producer.bind(py).get();
            producer
                .topic(&data_topic)
                .and_then(|data| Ok((data, producer.topic(&dlq_topic)?)))
        };
        let (data, dlq) = handles.map_err(|refusal| PyValueError::new_err(format!("topic handle: {refusal:?}")))?;
        Ok(Deliveries {
            producer,
            data_topic: data,
            dlq_topic: dlq,
            data_name: data_topic,
            dlq_name: dlq_topic,
            data: (0..data_partitions).map(|_| Arc::new(Group::default())).collect(),
            dlq_partition,
            dlq: Arc::new(Group::default()),
        })
    }

    /// How many records have been reported (delivered or failed).
    fn reported(&self) -> u64 {
        self.groups().map(|(_, _, group)| group.reported()).sum()
    }

    /// (topic, partition, position, error) of every failed record, by group, in each group's order.
    fn failures(&self, py: Python<'_>) -> PyResult<Vec<FailureRow>> {
        let mut found = Vec::new();
        for (topic, partition, group) in self.groups() {
            for (position, info) in group.snapshot().failures {
                found.push((topic.to_owned(), partition, position, Py::new(py, PyClientError { info })?));
            }
        }
        Ok(found)
    }

    /// Per partition of `topic`: the offsets of the first and last record delivered there.
    fn offset_ranges(&self, topic: &str) -> HashMap<u32, (i64, i64)> {
        self.groups()
            .filter(|(group_topic, _, _)| *group_topic == topic)
            .filter_map(|(_, partition, group)| {
                let state = group.snapshot();
                Some((partition, (state.first?, state.last?)))
            })
            .collect()
    }
}

/// `info` as the Python ClientError.
pub fn client_error(py: Python<'_>, info: ErrorInfo) -> PyResult<Py<PyClientError>> {
    Py::new(py, PyClientError { info })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negative_timeout_is_none_and_a_positive_one_is_kept_to_the_millisecond() {
        assert_eq!(timeout_of(-1.0), Timeout::Never);
        assert_eq!(timeout_of(1.5), Timeout::After(Duration::from_millis(1500)));
        assert_eq!(timeout_ms(timeout_of(0.0)), 0);
        assert_eq!(timeout_ms(timeout_of(2.0009)), 2000);
        assert_eq!(timeout_ms(timeout_of(-0.5)), -1);
    }

    #[test]
    fn a_timeout_librdkafka_cannot_hold_is_none_not_a_wrapped_number() {
        for seconds in [f64::INFINITY, f64::NAN, 1e10] {
            assert_eq!(timeout_ms(timeout_of(seconds)), -1, "{seconds}");
        }
    }

    #[test]
    fn no_error_object_is_success() {
        // SAFETY: null is "no error".
        assert_eq!(unsafe { outcome(ptr::null_mut()) }, Ok(()));
    }

    #[test]
    fn an_error_object_is_read_as_confluent_kafka_shows_it() {
        // SAFETY: a new error object, handed to `outcome`, which destroys it.
        let info = unsafe {
            let error = rdsys::rd_kafka_error_new(
                rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__FENCED,
                c"%s".as_ptr(),
                c"fenced by a newer producer".as_ptr(),
            );
            outcome(error)
        };
        let expected = ErrorInfo::new("_FENCED", "fenced by a newer producer");
        assert_eq!(info, Err(expected));
    }
}
