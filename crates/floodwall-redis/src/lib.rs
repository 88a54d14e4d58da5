//! floodwall's redis integration (in progress).
