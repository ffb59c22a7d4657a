# Sourced by testfixture before a SQLite test file when the pagefile VFS is
# the default (run-tcl-tests sets PAGEFILE_VFS_DEFAULT=1).
#
# SQLite's tests delete, test and size database files with TCL's own
# [file delete], [file exists] and [file size], which never reach a VFS: on
# the pagefile VFS the files they mean live in the store, not on the local
# disk. This routes those three subcommands through the SQL functions the VFS
# registers (pagefile_unlink, pagefile_exists, pagefile_size) for paths that
# live in the store, and leaves every other use of [file] as it was. Likewise
# [file copy] and [file rename] of a store file (pagefile_copy: the copy is
# in the store too, where SQLite will look for it), [glob] (which also lists
# the store files this process knows of, pagefile_names) and testfixture's
# [hexio_read]/[hexio_write] (pagefile_read/pagefile_write) on store files.
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

# Runs "SELECT fn(args...)" on a fresh in-memory connection (each argument
# bound as a variable, so a byte array is a blob). A failure (a test
# injecting malloc faults, say) is an error for the caller to fall back on.
proc ::pagefile_tcl::store {fn args} {
  variable next_db
  set db ::pagefile_tcl::db[incr next_db]
  sqlite3 $db :memory:
  set params {}
  set i 0
  foreach a $args { set arg[incr i] $a; lappend params "\$arg$i" }
  set rc [catch {$db one "SELECT ${fn}([join $params ,])"} result]
  $db close
  if {$rc} { error $result }
  return $result
}

# The options before the names of [file copy|rename|delete]: -force, --.
proc ::pagefile_tcl::split_options {words} {
  set force 0
  while {[llength $words] && [string match -* [lindex $words 0]]} {
    set opt [lindex $words 0]
    set words [lrange $words 1 end]
    if {$opt eq "--"} break
    if {$opt eq "-force"} { set force 1 }
  }
  return [list $force $words]
}

# file copy|rename ?-force? ?--? FROM TO with FROM in the store: the store
# copies it (to a local name only when TO already is a local file).
proc ::pagefile_tcl::copy {op words} {
  lassign [split_options $words] force names
  lassign $names from to
  if {[llength $names] != 2 || ![in_store $from] || [::pagefile_tcl::tcl_file exists $to]} {
    return -code continue
  }
  if {!$force && [in_store $to]} {
    error "error ${op}ing \"$from\" to \"$to\": file already exists"
  }
  store pagefile_copy $from $to
  if {$op eq "renam"} { store pagefile_unlink $from }
  return ""
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
      lassign [::pagefile_tcl::split_options [lrange $args 1 end]] force names
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
    copy - rename {
      set op [expr {[lindex $args 0] eq "copy" ? "copy" : "renam"}]
      set rc [catch {::pagefile_tcl::copy $op [lrange $args 1 end]} result]
      if {$rc == 0} { return $result }
      if {$rc == 1} { error $result }
    }
    size {
      if {[llength $args] == 2 && [::pagefile_tcl::in_store [lindex $args 1]]} {
        return [::pagefile_tcl::store pagefile_size [lindex $args 1]]
      }
    }
  }
  tailcall ::pagefile_tcl::tcl_file {*}$args
}

# glob also finds store files (those this process knows of) for plain
# patterns: "glob ?-nocomplain? PATTERN...". A pattern relative to the
# working directory matches relative store names (the tests' "test.db*").
rename ::glob ::pagefile_tcl::tcl_glob
proc ::glob {args} {
  set opts {}
  set patterns $args
  while {[llength $patterns] && [string match -* [lindex $patterns 0]]} {
    set opt [lindex $patterns 0]
    if {$opt ni {-nocomplain --}} { tailcall ::pagefile_tcl::tcl_glob {*}$args }
    lappend opts $opt
    set patterns [lrange $patterns 1 end]
    if {$opt eq "--"} break
  }
  set found [::pagefile_tcl::tcl_glob -nocomplain -- {*}$patterns]
  if {![catch {::pagefile_tcl::store pagefile_names} names]} {
    foreach name [split [string trimright $names \n] \n] {
      foreach pattern $patterns {
        if {[string match $pattern $name] && $name ni $found} { lappend found $name }
      }
    }
  }
  if {![llength $found] && "-nocomplain" ni $opts} {
    error "no files matched glob pattern[expr {[llength $patterns] > 1 ? "s" : ""}] \"[join $patterns]\""
  }
  return $found
}

# testfixture's hexio_read FILE OFFSET AMT and hexio_write FILE OFFSET HEX
# on a store file.
rename ::hexio_read ::pagefile_tcl::hexio_read
proc ::hexio_read {file offset amt} {
  if {![::pagefile_tcl::in_store $file]} { tailcall ::pagefile_tcl::hexio_read $file $offset $amt }
  set bytes [::pagefile_tcl::store pagefile_read $file]
  binary scan [string range $bytes $offset [expr {$offset + $amt - 1}]] H* hex
  return [string toupper $hex]
}
rename ::hexio_write ::pagefile_tcl::hexio_write
proc ::hexio_write {file offset hex} {
  if {![::pagefile_tcl::in_store $file]} { tailcall ::pagefile_tcl::hexio_write $file $offset $hex }
  return [::pagefile_tcl::store pagefile_write $file $offset [binary format H* $hex]]
}

# open PATH ?ACCESS? of a store file (or, with an access that creates, of a
# journal or WAL of a store database): a channel onto the store's bytes
# (tests write WAL headers and frames with [open]/[puts]), read whole at
# open and written back whole at close when changed. Commands and the
# flag-list forms of ACCESS go to TCL's own open.
rename ::open ::pagefile_tcl::tcl_open
namespace eval ::pagefile_tcl {
  variable chans
  array set chans {}
}

proc ::pagefile_tcl::store_target {path access} {
  if {[in_store $path]} { return 1 }
  if {$access ni {w w+ a a+}} { return 0 }
  foreach suffix {-wal -journal} {
    set n [string length $suffix]
    if {[string match *$suffix $path] && [in_store [string range $path 0 end-$n]]} { return 1 }
  }
  return 0
}

proc ::open {args} {
  set path [lindex $args 0]
  set access [expr {[llength $args] > 1 ? [lindex $args 1] : "r"}]
  if {[string index $path 0] eq "|" || $access ni {r r+ w w+ a a+}
      || ![::pagefile_tcl::store_target $path $access]} {
    tailcall ::pagefile_tcl::tcl_open {*}$args
  }
  set bytes ""
  if {$access ni {w w+}} { set bytes [::pagefile_tcl::store pagefile_read $path] }
  set modes [dict get {r read r+ {read write} w write w+ {read write} a write a+ {read write}} $access]
  set chan [chan create $modes ::pagefile_tcl::channel]
  set ::pagefile_tcl::chans($chan) [dict create path $path bytes $bytes \
      at [expr {$access in {a a+} ? [string length $bytes] : 0}] \
      changed [expr {$access in {w w+}}] truncated [expr {$access in {w w+}}]]
  return $chan
}

# The handler of those channels (chan create).
proc ::pagefile_tcl::channel {op chan args} {
  variable chans
  switch -- $op {
    initialize { return {initialize finalize watch read write seek} }
    watch {}
    finalize {
      set c $chans($chan)
      unset chans($chan)
      if {[dict get $c changed]} {
        if {[dict get $c truncated]} { catch {store pagefile_unlink [dict get $c path]} }
        # (binary format: bound as a blob, never as text)
        store pagefile_write [dict get $c path] 0 [binary format a* [dict get $c bytes]]
      }
    }
    read {
      set c $chans($chan)
      set at [dict get $c at]
      set out [string range [dict get $c bytes] $at [expr {$at + [lindex $args 0] - 1}]]
      dict set chans($chan) at [expr {$at + [string length $out]}]
      return $out
    }
    write {
      set data [lindex $args 0]
      set c $chans($chan)
      set bytes [dict get $c bytes]
      set at [dict get $c at]
      if {$at > [string length $bytes]} {
        append bytes [binary format x[expr {$at - [string length $bytes]}]]
      }
      set end [expr {$at + [string length $data]}]
      set bytes [string range $bytes 0 [expr {$at - 1}]]$data[string range $bytes $end end]
      dict set chans($chan) bytes $bytes
      dict set chans($chan) at $end
      dict set chans($chan) changed 1
      return [string length $data]
    }
    seek {
      lassign $args offset base
      set c $chans($chan)
      set from [dict get {start 0 current -1 end -2} $base]
      if {$from == -1} { set from [dict get $c at] }
      if {$from == -2} { set from [string length [dict get $c bytes]] }
      set at [expr {$from + $offset}]
      if {$at < 0} { error "invalid seek" }
      dict set chans($chan) at $at
      return $at
    }
  }
}

# Without the VFS's functions every look-up above would quietly answer "not
# in the store" and the test would run against local files only: stop here.
if {[catch {::pagefile_tcl::store pagefile_exists [pwd]/no-such-file} msg]} {
  puts stderr "preamble.tcl: the pagefile VFS's SQL functions are missing ($msg);\
               is PAGEFILE_TEST_EXTENSION set to pagefile.so?"
  exit 1
}
