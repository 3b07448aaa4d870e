//! VFIO layer (see issue 3).
