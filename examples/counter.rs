//! A stateful server: one counter shared by every call, its tools and prompt written as
//! methods (`#[purra_protocol::handlers]`; doc comments become descriptions).
//! `cargo run -p examples --example counter`.

use std::sync::atomic::{AtomicI64, Ordering::SeqCst};

use purra_protocol::{RegistrationError, Server};

#[derive(Default)]
struct Counter {
    value: AtomicI64,
}

#[purra_protocol::handlers]
impl Counter {
    /// Adds 1 to the counter and returns the new value.
    #[tool]
    fn increment(&self) -> String {
        (self.value.fetch_add(1, SeqCst) + 1).to_string()
    }

    /// Subtracts 1 from the counter and returns the new value.
    #[tool]
    fn decrement(&self) -> String {
        (self.value.fetch_sub(1, SeqCst) - 1).to_string()
    }

    /// The counter's value.
    #[tool(read_only)]
    fn get(&self) -> String {
        self.value.load(SeqCst).to_string()
    }

    /// Sets the counter to `value`, which must not be negative.
    #[tool(destructive, idempotent)]
    fn set(&self, value: i64) -> Result<String, String> {
        if value < 0 {
            return Err(format!("{value} is negative")); // isError: the model reads it
        }
        self.value.store(value, SeqCst);
        Ok(format!("set to {value}"))
    }

    /// Asks for the steps that bring the counter to `goal`.
    #[prompt]
    fn plan(&self, goal: i64) -> String {
        format!(
            "The counter is {}. Which calls reach {goal}?",
            self.value.load(SeqCst)
        )
    }
}

/// The server, every definition registered.
pub fn server() -> Result<Server, RegistrationError> {
    let server = Server::builder("counter", "1.0.0").build();
    server.register(Counter::default())?;
    Ok(server)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), RegistrationError> {
    server()?.serve_stdio().await; // until EOF on stdin
    Ok(())
}
