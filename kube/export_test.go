package kube

// ScrapePath exposes scrapePath to the lab tests: kwok's simulated pods
// have no network, so the parser is exercised on the API server's own
// /metrics, fetched through the same client path.
var ScrapePath = scrapePath
