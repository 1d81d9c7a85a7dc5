//! The Skills extension's fixtures (SEP-2640; the `sep-2640-skills-enumeration`,
//! `sep-2640-skills-manifest` and `sep-2640-skills-directory` server scenarios of the suite's
//! 0.2.0-alpha.12): two skills built in code, each with a subfolder (the directory scenario
//! walks the first one listed), so every check has something to look at.

use purra_protocol::skills::SkillBundle;
use purra_protocol::{RegistrationError, Server};

/// The first skill by URI: a `SKILL.md` with frontmatter beyond the two required fields, a
/// reference and a template in subfolders.
const PDF: &str = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nlicense: Apache-2.0\nmetadata:\n  version: \"2.1.0\"\n---\n# PDF processing\n\nSee [the forms guide](references/FORMS.md) and pick a template from `templates/`.\n";
const FORMS: &str = "# Forms\n\nFill every required field.\n";
const INVOICE: &str = "# Invoice\n";
/// The second skill, under a prefix (the first by URI).
const REFUNDS: &str =
    "---\nname: refunds\ndescription: Process customer refund requests per company policy\n---\n# Refunds\n\nAnswer with [the email](examples/email.md).\n";
const EMAIL: &str = "Dear customer, your refund is on its way.\n";

/// Serves the two skills on `server`.
pub fn add(server: &Server) -> Result<(), RegistrationError> {
    server.add_skill(
        SkillBundle::new("pdf-processing")
            .file("SKILL.md", PDF)
            .file("references/FORMS.md", FORMS)
            .file("templates/invoice.md", INVOICE),
    )?;
    server.add_skill(
        SkillBundle::new("acme/billing/refunds")
            .file("SKILL.md", REFUNDS)
            .file("examples/email.md", EMAIL),
    )?;
    Ok(())
}
