package main

// Exit codes are mesh-verify's own convention (README.md, exit codes): a
// dedicated code per outcome so a CI gate can tell a failed expectation
// from inconclusive evidence and from a broken setup.
const (
	exitPass         = 0
	exitFail         = 1
	exitInconclusive = 2
	exitSetup        = 3
	exitInvalidInput = 4
	exitInterrupted  = 130
)
