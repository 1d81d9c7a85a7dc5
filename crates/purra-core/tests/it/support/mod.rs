//! Helpers shared by purra-core's integration tests: the approval binding a confirmed write
//! registers with.

#![allow(dead_code)] // each test module uses what it needs

use purra_core::ApprovalBinding;

/// A complete approval binding (every part non-empty).
pub fn binding() -> ApprovalBinding {
    ApprovalBinding {
        binding_id: "document-service".into(),
        binding_revision: "host-config-1".into(),
        scope_id: "sandbox-documents".into(),
        scope_revision: "scope-1".into(),
    }
}
