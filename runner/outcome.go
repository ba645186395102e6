package runner

import (
	"net/http"
	"strconv"

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
	if codes.Contains(int(r.Code)) {
		r.Error = ""
		return true
	}
	if r.Error == "" {
		r.Error = strconv.Itoa(int(r.Code)) + " " + http.StatusText(int(r.Code)) + " (not in attack.successCodes)"
	}
	return false
}
