//! URI templates of resource templates: RFC 6570 simple `{var}` expressions, parsed once at
//! registration and matched against each `resources/read` URI.

use std::collections::HashMap;

use super::error::RegistrationError;

/// One piece of a URI template.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TemplatePart {
    Literal(String),
    Var(String),
}

pub(crate) fn parse_template(t: &str) -> Result<Vec<TemplatePart>, RegistrationError> {
    let invalid = |reason: String| RegistrationError::InvalidTemplate {
        template: t.to_owned(),
        reason,
    };
    let mut parts = Vec::new();
    let mut rest = t;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(TemplatePart::Literal(rest[..open].to_owned()));
        }
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| invalid("an unclosed '{'".into()))?;
        let name = &rest[open + 1..open + close];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(invalid(
                "only simple {name} expressions are supported".into(),
            ));
        }
        if matches!(parts.last(), Some(TemplatePart::Var(_))) {
            return Err(invalid(
                "two expressions need a literal between them".into(),
            ));
        }
        parts.push(TemplatePart::Var(name.to_owned()));
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(TemplatePart::Literal(rest.to_owned()));
    }
    Ok(parts)
}

/// The variable names of a parsed template.
pub(crate) fn variables(parts: &[TemplatePart]) -> impl Iterator<Item = &str> {
    parts.iter().filter_map(|p| match p {
        TemplatePart::Var(v) => Some(v.as_str()),
        TemplatePart::Literal(_) => None,
    })
}

/// Matches `uri` against a parsed template; a variable matches a non-empty run without `/`.
pub(crate) fn match_template(parts: &[TemplatePart], uri: &str) -> Option<HashMap<String, String>> {
    let mut vars = HashMap::new();
    let mut rest = uri;
    for (i, part) in parts.iter().enumerate() {
        match part {
            TemplatePart::Literal(l) => rest = rest.strip_prefix(l.as_str())?,
            TemplatePart::Var(name) => {
                let end = match parts.get(i + 1) {
                    Some(TemplatePart::Literal(next)) => rest.find(next.as_str())?,
                    _ => rest.len(),
                };
                let value = &rest[..end];
                if value.is_empty() || value.contains('/') {
                    return None;
                }
                vars.insert(name.clone(), value.to_owned());
                rest = &rest[end..];
            }
        }
    }
    rest.is_empty().then_some(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_simple_expressions() {
        let parts = parse_template("fixture://items/{id}").unwrap();
        assert_eq!(
            match_template(&parts, "fixture://items/42"),
            Some(HashMap::from([("id".to_owned(), "42".to_owned())]))
        );
        assert_eq!(match_template(&parts, "fixture://items/"), None);
        assert_eq!(match_template(&parts, "fixture://items/4/2"), None);
        let parts = parse_template("test://template/{id}/data").unwrap();
        assert!(match_template(&parts, "test://template/123/data").is_some());
        assert_eq!(variables(&parts).collect::<Vec<_>>(), ["id"]);
        assert_eq!(
            parse_template("x://{a}{b}").unwrap_err().to_string(),
            "invalid URI template \"x://{a}{b}\": two expressions need a literal between them"
        );
        assert!(parse_template("x://{a").is_err());
    }
}
