"""The KDA packed-decode op: `fused` (Triton kernel and launcher), `naive` (float64 reference), `checked`."""
