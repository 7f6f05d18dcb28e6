//! openraft's own storage test suite, run against rbolt files.

use crate::common::{TestConfig, TestLog, TestMachine, TestState};
use openraft::StorageError;
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::type_config::TypeConfigExt;
use std::time::Instant;
use tempfile::TempDir;

/// Each store the suite asks for: a fresh directory with a log file and a state machine,
/// opened with the crate's durable defaults.
struct RboltBuilder;

impl StoreBuilder<TestConfig, TestLog, TestState, TempDir> for RboltBuilder {
    async fn build(&self) -> Result<(TempDir, TestLog, TestState), StorageError<TestConfig>> {
        let dir = TempDir::new().map_err(|e| StorageError::read(TestConfig::err_from_error(&e)))?;
        let (log, state) = rbolt_raft::open::<TestConfig, _>(dir.path(), TestMachine)
            .map_err(|e| StorageError::read(TestConfig::err_from_error(&e)))?;
        Ok((dir, log, state))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openraft_storage_suite() {
    let start = Instant::now();
    Suite::test_all(RboltBuilder)
        .await
        .expect("openraft's storage suite passes");
    eprintln!("openraft storage suite: passed in {:.2?}", start.elapsed());
}
