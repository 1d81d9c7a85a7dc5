//! The adapter's limits: seed defaults; each may be lowered, the timeout raised to 300 s; and
//! the host's opt-in to tool schemas that declare draft-07 or 2019-09.

use std::time::Duration;

use crate::codes;
use crate::AdapterError;

/// Bounds on discovery and calls. Start from [`Limits::default`] and lower what you need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Pages of `tools/list` (default 32).
    pub max_pages: u32,
    /// Tools across all pages (default 256).
    pub max_tools: u32,
    /// Bytes of all `tools/list` results together (default 1 MiB).
    pub max_catalog_bytes: u64,
    /// Bytes of one selected schema, `$schema` included (default 64 KiB).
    pub max_schema_bytes: u64,
    /// Bytes of one selected description (default 8 KiB).
    pub max_description_bytes: u64,
    /// Bytes of one `tools/call` result; also bounds the encoded arguments (default 64 KiB).
    pub max_result_bytes: u64,
    /// Content blocks of one result (default 128).
    pub max_content_blocks: u32,
    /// Per-request timeout (default 30 s, at most 300 s).
    pub timeout: Duration,
    /// Whether a selected tool's schema may declare JSON Schema draft-07 or 2019-09 at its root
    /// (every TypeScript-SDK server declares draft-07): accepted when every keyword means the
    /// same there as in 2020-12, the declaration kept in the snapshot and its digest; what means
    /// something else is `mcp_schema_unsupported` (purra-schema's dialect table). Default false:
    /// seed 000's profile, whose only declaration is 2020-12's.
    pub earlier_schema_dialects: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pages: 32,
            max_tools: 256,
            max_catalog_bytes: 1024 * 1024,
            max_schema_bytes: 64 * 1024,
            max_description_bytes: 8 * 1024,
            max_result_bytes: 64 * 1024,
            max_content_blocks: 128,
            timeout: Duration::from_secs(30),
            earlier_schema_dialects: false,
        }
    }
}

/// The longest timeout allowed.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(300);

impl Limits {
    /// Checks that every limit is at least 1 and at most its default, and the timeout between
    /// 1 ms and 300 s; anything else is `mcp_config_invalid`. (The dialect opt-in is no bound.)
    pub fn validate(&self) -> Result<(), AdapterError> {
        let d = Limits::default();
        let ok = (1..=d.max_pages).contains(&self.max_pages)
            && (1..=d.max_tools).contains(&self.max_tools)
            && (1..=d.max_catalog_bytes).contains(&self.max_catalog_bytes)
            && (1..=d.max_schema_bytes).contains(&self.max_schema_bytes)
            && (1..=d.max_description_bytes).contains(&self.max_description_bytes)
            && (1..=d.max_result_bytes).contains(&self.max_result_bytes)
            && (1..=d.max_content_blocks).contains(&self.max_content_blocks)
            && self.timeout >= Duration::from_millis(1)
            && self.timeout <= MAX_TIMEOUT;
        if ok {
            Ok(())
        } else {
            Err(AdapterError::new(codes::config_invalid()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_may_be_lowered_and_the_timeout_raised_to_300_s() {
        assert!(Limits::default().validate().is_ok());
        let lowered = Limits {
            max_pages: 1,
            max_result_bytes: 10,
            timeout: MAX_TIMEOUT,
            ..Limits::default()
        };
        assert!(lowered.validate().is_ok());
        assert!(!Limits::default().earlier_schema_dialects);
        let earlier = Limits {
            earlier_schema_dialects: true,
            ..Limits::default()
        };
        assert!(earlier.validate().is_ok());
        for bad in [
            Limits {
                max_pages: 33,
                ..Limits::default()
            },
            Limits {
                max_tools: 0,
                ..Limits::default()
            },
            Limits {
                max_catalog_bytes: 1024 * 1024 + 1,
                ..Limits::default()
            },
            Limits {
                max_schema_bytes: 64 * 1024 + 1,
                ..Limits::default()
            },
            Limits {
                max_description_bytes: 8 * 1024 + 1,
                ..Limits::default()
            },
            Limits {
                max_result_bytes: 64 * 1024 + 1,
                ..Limits::default()
            },
            Limits {
                max_content_blocks: 129,
                ..Limits::default()
            },
            Limits {
                timeout: MAX_TIMEOUT + Duration::from_millis(1),
                ..Limits::default()
            },
            Limits {
                timeout: Duration::ZERO,
                ..Limits::default()
            },
        ] {
            assert_eq!(
                bad.validate().unwrap_err().code,
                codes::config_invalid(),
                "{bad:?}"
            );
        }
    }
}
