//! purra-fuzz's integration tests in one binary: the committed corpora replayed on stable.

mod corpus;
