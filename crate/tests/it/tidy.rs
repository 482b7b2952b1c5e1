//! Tidy tests.
