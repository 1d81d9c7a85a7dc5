//! Registrations refuse implicit authority, and the catalog revision tracks exactly the descriptive parts.

use purra_core::*;
use serde_json::json;

use crate::support::binding;

fn input() -> CompiledSchema {
    CompiledSchema::compile(&json!({"type": "object", "properties": {"q": {"type": "string"}}}))
        .unwrap()
}

fn base(name: &str, description: &str) -> tool::ToolBuilder {
    ToolRegistration::builder(name)
        .description(description)
        .input_schema(input())
        .read("Search")
        .scope(ScopeCheck::OptOut)
        .concurrency(Concurrency::Safe)
        .handler(|_args, _ctx| async { Ok(json!({})) })
}

#[test]
fn every_authority_bearing_part_is_explicit() {
    let no_scope = ToolRegistration::builder("search")
        .description("d")
        .input_schema(input())
        .read("Search")
        .concurrency(Concurrency::Safe)
        .handler(|_args, _ctx| async { Ok(json!({})) })
        .build();
    assert_eq!(
        no_scope.unwrap_err(),
        ToolRegistrationError::Missing("scope")
    );
    let no_concurrency = ToolRegistration::builder("search")
        .description("d")
        .input_schema(input())
        .read("Search")
        .scope(ScopeCheck::OptOut)
        .handler(|_args, _ctx| async { Ok(json!({})) })
        .build();
    assert_eq!(
        no_concurrency.unwrap_err(),
        ToolRegistrationError::Missing("concurrency")
    );
    assert_eq!(
        base("Search", "d").build().unwrap_err(),
        ToolRegistrationError::InvalidName
    );
    assert_eq!(
        base(&"a".repeat(65), "d").build().unwrap_err(),
        ToolRegistrationError::InvalidName
    );
    assert_eq!(
        base("search", "d").read("").build().unwrap_err(),
        ToolRegistrationError::EmptyTitle
    );
    // Writes: a complete binding, never concurrency-safe.
    assert_eq!(
        base("update", "d")
            .confirm("Update", Risk::Write, binding())
            .build()
            .unwrap_err(),
        ToolRegistrationError::ConcurrentWrite
    );
    let mut partial = binding();
    partial.scope_revision.clear();
    assert_eq!(
        base("update", "d")
            .confirm("Update", Risk::Destructive, partial)
            .concurrency(Concurrency::Exclusive)
            .build()
            .unwrap_err(),
        ToolRegistrationError::MissingApprovalBinding
    );
    let write = base("update", "d")
        .confirm("Update", Risk::Destructive, binding())
        .concurrency(Concurrency::Exclusive)
        .build()
        .unwrap();
    assert!(write.is_confirm());
    assert_eq!(
        write.descriptive()["policy"],
        json!({"mode": "confirm", "title": "Update", "risk": "destructive"})
    );
    assert_eq!(
        write.descriptive()["approvalBinding"],
        json!(binding().identity().as_str())
    );
    assert_eq!(write.descriptive()["scope"], json!("opt_out"));
}

#[test]
fn catalog_names_are_unique_and_the_revision_tracks_descriptive_parts() {
    let err = Catalog::new(vec![
        base("search", "a").build().unwrap(),
        base("search", "b").build().unwrap(),
    ])
    .unwrap_err();
    assert_eq!(err, CatalogError::DuplicateName("search".into()));
    let one = Catalog::new(vec![
        base("alpha", "a").build().unwrap(),
        base("beta", "b").build().unwrap(),
    ])
    .unwrap();
    let same = Catalog::new(vec![
        base("beta", "b").build().unwrap(),
        base("alpha", "a").build().unwrap(),
    ])
    .unwrap();
    let other = Catalog::new(vec![
        base("alpha", "a").build().unwrap(),
        base("beta", "B").build().unwrap(),
    ])
    .unwrap();
    assert_eq!(one.revision(), same.revision());
    assert_ne!(one.revision(), other.revision());
    let names: Vec<String> = one.specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert_eq!(
        serde_json::to_value(one.get("alpha").unwrap().spec()).unwrap(),
        json!({"name": "alpha", "description": "a", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}, "outputSchema": null})
    );
    // The revision is the identity of the documented structure.
    let expected = json_identity(&json!({
        "profile": "purra.catalog/v1",
        "tools": [one.get("alpha").unwrap().descriptive(), one.get("beta").unwrap().descriptive()],
    }))
    .unwrap();
    assert_eq!(one.revision(), &expected);
    assert!(!one.has_confirm_tools());
}
