//! `dashdb`: the analysis database (Mekong's "dashdb") as versioned JSON.
//!
//! Its job (not built yet): serde types of the schema (per node: partitionability, split
//! dimensions; per argument: shape, element size, read and write maps as ISL text), with
//! load/save/validate that refuse another schema version or another source hash.
