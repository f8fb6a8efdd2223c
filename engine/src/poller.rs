//! The thread that serves a producer's events: delivery reports, client errors, logs, statistics.
//!
//! rust-rdkafka's `ThreadedProducer` polls in a loop of 100 ms waits, and each wait hands librdkafka
//! the time left rounded down to whole milliseconds, so the last millisecond of every wait is spent
//! polling without waiting, over and over (the fault librdkafka fixed in its own main loop, #4671).
//! On a worker whose broker was down that spin was 0.8% of a core, a sixth of the worker's CPU.
//!
//! This thread sleeps instead on an eventfd that librdkafka writes when an event is queued for the
//! application (`rd_kafka_queue_io_event_enable`), then serves exactly what is queued. A wait still
//! ends after [`IDLE_WAIT_MS`], so a missed wake-up could only delay a report, never lose it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::bindings as rdsys;
use rdkafka::producer::{BaseProducer, Producer as _, ProducerContext};

/// The longest a wait lasts without a wake-up.
const IDLE_WAIT_MS: i32 = 100;

/// What the thread and its owner share: the application's queue of the client, the eventfd
/// librdkafka writes to when that queue gets an event, and the order to stop.
struct Shared {
    queue: *mut rdsys::rd_kafka_queue_t,
    wake: OwnedFd,
    stop: AtomicBool,
}

// SAFETY: librdkafka's queue handles may be used from any thread; the rest is Send + Sync.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    fn queued(&self) -> usize {
        // SAFETY: `queue` is a live handle until `Shared` is dropped.
        unsafe { rdsys::rd_kafka_queue_length(self.queue) }
    }

    /// Sleeps until librdkafka (or [`Poller::drop`]) writes to the eventfd, or [`IDLE_WAIT_MS`].
    fn wait(&self) {
        let fd = self.wake.as_raw_fd();
        let mut ready = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let mut count = 0u64;
        // SAFETY: one valid pollfd; an 8-byte read into a u64 (an eventfd's counter, reset by the
        // read; EAGAIN when nothing was written, which is fine).
        unsafe {
            libc::poll(&mut ready, 1, IDLE_WAIT_MS);
            libc::read(fd, (&mut count as *mut u64).cast(), 8);
        }
    }

    fn wake(&self) {
        let one = 1u64;
        // SAFETY: an 8-byte write from a u64 to an eventfd.
        unsafe {
            libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: librdkafka stops writing to the eventfd before it is closed (after this, as
        // fields drop after `drop`), then the queue handle is released.
        unsafe {
            rdsys::rd_kafka_queue_io_event_enable(self.queue, -1, ptr::null(), 0);
            rdsys::rd_kafka_queue_destroy(self.queue);
        }
    }
}

/// Serves `producer`'s events on its own thread until dropped.
pub struct Poller {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Poller {
    pub fn start<C: ProducerContext + 'static>(producer: Arc<BaseProducer<C>>) -> std::io::Result<Poller> {
        // SAFETY: eventfd returns a new descriptor we own, or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is ours (above); the client outlives the queue handle, which `Shared`
        // releases before `producer`'s last reference goes (the thread's, joined first, and the
        // owner's, declared after the poller); librdkafka copies the 8-byte payload.
        let shared = unsafe {
            let wake = OwnedFd::from_raw_fd(fd);
            let queue = rdsys::rd_kafka_queue_get_main(producer.client().native_ptr());
            let one = 1u64;
            rdsys::rd_kafka_queue_io_event_enable(queue, fd, (&one as *const u64).cast(), 8);
            Arc::new(Shared {
                queue,
                wake,
                stop: AtomicBool::new(false),
            })
        };
        let serving = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("engine events".to_owned())
            .spawn(move || loop {
                // Exactly what is queued: a poll that does not wait never waits for the clock.
                while serving.queued() > 0 {
                    producer.poll(Duration::ZERO);
                }
                if serving.stop.load(Ordering::Acquire) {
                    return;
                }
                serving.wait();
            })?;
        Ok(Poller {
            shared,
            thread: Some(thread),
        })
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake();
        if let Some(thread) = self.thread.take() {
            // A panic on the thread was already printed; nothing more to do with it here.
            let _ = thread.join();
        }
    }
}
