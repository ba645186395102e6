package measure

import (
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// answered decides whether a result counts as a success by
// attack.successCodes (README.md, a scenario) and makes its error
// say so for the tally: vegeta calls every status below 400 a success, a
// redirect included, and anything else an error. A result without a
// status (no response) is always a failure.
func answered(r *attack.Result, codes scenarios.StatusCodes) bool {
	if r.Code == 0 {
		if r.Error == "" {
			r.Error = "no response"
		}
		return false
	}
	if r.Trailer != nil && r.Code == http.StatusOK {
		// A gRPC call: HTTP 200 carries every outcome, the call's is its
		// grpc-status (a trailer, or a header in a trailers-only answer).
		st, msg := r.Trailer.Get("Grpc-Status"), r.Trailer.Get("Grpc-Message")
		if st == "" {
			st, msg = r.Headers.Get("Grpc-Status"), r.Headers.Get("Grpc-Message")
		}
		if st == "0" {
			r.Error = ""
			return true
		}
		if st == "" {
			r.Error = "gRPC answer without grpc-status"
		} else {
			r.Error = "grpc-status " + st + " " + grpcCode(st)
			if msg != "" {
				r.Error += ": " + msg
			}
		}
		return false
	}
	if codes.Contains(int(r.Code)) {
		r.Error = ""
		return true
	}
	if r.Error == "" {
		r.Error = strconv.Itoa(int(r.Code)) + " " + http.StatusText(int(r.Code)) + " (not in attack.successCodes)"
	}
	return false
}

// grpcCode names a gRPC status code as grpc-go does.
func grpcCode(st string) string {
	n, err := strconv.ParseUint(st, 10, 32)
	if err != nil {
		return "(unknown code)"
	}
	return codes.Code(n).String()
}
