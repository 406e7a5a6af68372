"""fgrad_nn: neural-network building blocks on top of fgrad's public API."""
