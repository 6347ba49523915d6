//! A thread standing in for an engine that runs off the JS thread: JS hands it numbers (`send`), and it hands each
//! batch back through a threadsafe function, which wakes the JS thread. `echo` is the same value crossing
//! synchronously, as the engine's calls do today.

use std::sync::mpsc::{channel, Sender};
use std::sync::Mutex;

use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

#[napi]
pub struct Hop {
    to_thread: Mutex<Option<Sender<(u32, u32)>>>,
}

#[napi]
impl Hop {
    /// `back` is called on the JS thread with each batch, as text: `batch` numbers from the one sent.
    #[napi(constructor)]
    pub fn new(back: ThreadsafeFunction<String, (), String, napi::Status, false>) -> Self {
        let (to_thread, from_js) = channel::<(u32, u32)>();
        std::thread::spawn(move || {
            while let Ok((first, batch)) = from_js.recv() {
                let numbers: Vec<String> = (first..first + batch).map(|n| n.to_string()).collect();
                back.call(numbers.join(","), ThreadsafeFunctionCallMode::NonBlocking);
            }
        });
        Hop { to_thread: Mutex::new(Some(to_thread)) }
    }

    #[napi]
    pub fn send(&self, first: u32, batch: u32) {
        if let Some(to_thread) = self.to_thread.lock().expect("not poisoned").as_ref() {
            let _ = to_thread.send((first, batch));
        }
    }

    /// Ends the thread, which lets the threadsafe function go.
    #[napi]
    pub fn close(&self) {
        self.to_thread.lock().expect("not poisoned").take();
    }
}

#[napi]
pub fn echo(text: String) -> String {
    text
}
