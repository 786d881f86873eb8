//! `isl-glue`: the one crate that talks to ISL.
//!
//! Its job (not built yet): parse access maps, fix parameters, add partition boxes, take
//! ranges, coalesce, and turn delinearized element sets into contiguous runs and rectangles
//! of linear offsets. ISL objects are exchanged with Polly as text only.
