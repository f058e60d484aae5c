//! Object-store access: the one place that classifies store outcomes, and
//! stackable wrappers over any `ObjectStore`.
