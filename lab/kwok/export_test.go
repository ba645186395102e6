package kwok

// ExtractContext is what Start does once a cluster's context is renamed.
var ExtractContext = extractContext
