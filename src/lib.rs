//! floodwall
