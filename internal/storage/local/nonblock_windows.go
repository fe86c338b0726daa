package local

// noBlock: Windows has no FIFOs in a directory.
const noBlock = 0
