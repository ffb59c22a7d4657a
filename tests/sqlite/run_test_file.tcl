# testfixture run_test_file.tcl TEST_FILE ?ARG...?
#
# Runs one of SQLite's TCL test files as `testfixture TEST_FILE ARG...` would,
# after the preamble that routes [file delete|exists|size] to the store when
# the pagefile VFS is the default (PAGEFILE_VFS_DEFAULT=1).
if {[llength $argv] < 1} {
  puts stderr "usage: testfixture run_test_file.tcl TEST_FILE ?ARG...?"
  exit 2
}
if {[info exists ::env(PAGEFILE_VFS_DEFAULT)] && $::env(PAGEFILE_VFS_DEFAULT) eq "1"} {
  source [file join [file dirname [file normalize [info script]]] preamble.tcl]
}
# The test file finds tester.tcl next to itself through $argv0.
set argv0 [file normalize [lindex $argv 0]]
set argv [lrange $argv 1 end]
set argc [llength $argv]
source $argv0
