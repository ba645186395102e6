package main

// Exit codes follow the k6 convention: a dedicated code per reason so a CI
// gate can tell a failed expectation from a broken setup.
const (
	exitPass         = 0
	exitFail         = 1
	exitInconclusive = 2
	exitSetup        = 3
	exitInvalidInput = 4
	exitInterrupted  = 130
)
