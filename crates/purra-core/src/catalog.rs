//! The immutable tool catalog an agent runs against, and its revision.
//!
//! The revision is the JSON identity of
//! `{"profile": "purra.catalog/v1", "tools": [descriptive parts sorted by name]}`; it is part of the run
//! preset fingerprint, so replacing the catalog invalidates approvals prepared against the old one.
//! A catalog never changes after construction: to take a new tool list, build a new catalog and swap
//! it in at a safe boundary.

use crate::identity::{identity_of_list, IdentityError, JsonIdentity};
use crate::tool::{ToolRegistration, ToolSpec};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Why a catalog was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CatalogError {
    /// Two registrations share a local name.
    DuplicateName(String),
    /// The revision could not be computed.
    Identity(IdentityError),
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CatalogError::DuplicateName(name) => write!(f, "two tools are named {name:?}"),
            CatalogError::Identity(e) => write!(f, "catalog has no revision: {e}"),
        }
    }
}

impl std::error::Error for CatalogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CatalogError::Identity(e) => Some(e),
            CatalogError::DuplicateName(_) => None,
        }
    }
}

/// An immutable set of registrations with unique names.
#[derive(Debug)]
pub struct Catalog {
    tools: BTreeMap<String, Arc<ToolRegistration>>,
    revision: JsonIdentity,
}

impl Catalog {
    /// Builds a catalog, refusing duplicate names.
    pub fn new(registrations: Vec<ToolRegistration>) -> Result<Catalog, CatalogError> {
        let mut tools = BTreeMap::new();
        for reg in registrations {
            let name = reg.name().to_owned();
            if tools.insert(name.clone(), Arc::new(reg)).is_some() {
                return Err(CatalogError::DuplicateName(name));
            }
        }
        // Canonicalized in place: no copy of every schema just to hash them.
        let revision = identity_of_list(
            "profile",
            "purra.catalog/v1",
            "tools",
            tools.values().map(|t| t.descriptive()),
        )
        .map_err(CatalogError::Identity)?;
        Ok(Catalog { tools, revision })
    }

    /// The catalog revision.
    pub fn revision(&self) -> &JsonIdentity {
        &self.revision
    }

    /// The registration named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<ToolRegistration>> {
        self.tools.get(name)
    }

    /// Registrations sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<ToolRegistration>> {
        self.tools.values()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether the catalog has no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Whether any tool has a confirm policy.
    pub fn has_confirm_tools(&self) -> bool {
        self.tools.values().any(|t| t.is_confirm())
    }

    /// What the model is told, sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec()).collect()
    }
}
