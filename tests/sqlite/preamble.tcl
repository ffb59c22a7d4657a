# Sourced by testfixture before a SQLite test file when the pagefile VFS is
# the default (run-tcl-tests sets PAGEFILE_VFS_DEFAULT=1).
#
# SQLite's tests delete, test and size database files with TCL's own
# [file delete], [file exists] and [file size], which never reach a VFS: on
# the pagefile VFS the files they mean live in the store, not on the local
# disk. This routes those three subcommands through the SQL functions the VFS
# registers (pagefile_unlink, pagefile_exists, pagefile_size) for paths that
# live in the store, and leaves every other use of [file] as it was.
#
# Each call opens and closes its own in-memory connection: the tests check
# at the end that no memory is left allocated and no file is left open, and
# a connection kept across the whole file would fail those checks.
#
# Tests that replace [file] themselves wrap this [file], so their wrapper
# still reaches the store through it.

namespace eval ::pagefile_tcl {
  variable next_db 0
}
rename ::file ::pagefile_tcl::tcl_file

# Runs "SELECT fn($path)" on a fresh in-memory connection. A failure (a test
# injecting malloc faults, say) is an error for the caller to fall back on.
proc ::pagefile_tcl::store {fn path} {
  variable next_db
  set db ::pagefile_tcl::db[incr next_db]
  sqlite3 $db :memory:
  set rc [catch {$db one "SELECT ${fn}(\$path)"} result]
  $db close
  if {$rc} { error $result }
  return $result
}

# True when $path names a file of the store. A look-up that fails (a test
# injecting malloc faults) counts as no; a missing function is an error, or
# the test would quietly run against local files only.
proc ::pagefile_tcl::in_store {path} {
  if {[catch {::pagefile_tcl::store pagefile_exists $path} exists]} {
    if {[string match "no such function*" $exists]} {
      error "pagefile VFS: $exists (the extension's functions are gone)"
    }
    return 0
  }
  return [expr {$exists ne "" && $exists}]
}

proc ::file {args} {
  switch -- [lindex $args 0] {
    delete {
      # file delete ?-force? ?--? name...: the store's copy goes too.
      set names [lrange $args 1 end]
      while {[llength $names] && [string match -* [lindex $names 0]]} {
        set opt [lindex $names 0]
        set names [lrange $names 1 end]
        if {$opt eq "--"} break
      }
      foreach name $names {
        if {[::pagefile_tcl::in_store $name]} {
          ::pagefile_tcl::store pagefile_unlink $name
        }
      }
    }
    exists {
      if {[llength $args] == 2 && [::pagefile_tcl::in_store [lindex $args 1]]} {
        return 1
      }
    }
    size {
      if {[llength $args] == 2 && [::pagefile_tcl::in_store [lindex $args 1]]} {
        return [::pagefile_tcl::store pagefile_size [lindex $args 1]]
      }
    }
  }
  tailcall ::pagefile_tcl::tcl_file {*}$args
}

# Without the VFS's functions every look-up above would quietly answer "not
# in the store" and the test would run against local files only: stop here.
if {[catch {::pagefile_tcl::store pagefile_exists [pwd]/no-such-file} msg]} {
  puts stderr "preamble.tcl: the pagefile VFS's SQL functions are missing ($msg);\
               is PAGEFILE_TEST_EXTENSION set to pagefile.so?"
  exit 1
}
