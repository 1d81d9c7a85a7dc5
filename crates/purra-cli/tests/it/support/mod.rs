//! Helpers shared by the test modules: running the `purra` binary and reading what it printed
//! (`run`), the SDK clients of a gateway (`clients`), the peers (`peers`), and the browser driver
//! (`webdriver`).

pub mod clients;
pub mod peers;
pub mod run;
pub use purra_store_tests::webdriver;
