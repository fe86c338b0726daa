// Package chaos is the seeded, randomized fault simulation of the product's guarantees: many
// backup cycles over a small fleet, each with at most one fault drawn at a
// random point, and the product's invariants checked after every cycle.
//
// The fleet (fleet.go): source instances sql01 and sql02 (emulated SQL
// Server over TDS, internal/sqlsim), both holding a database DBA and one
// other (sales on sql01, HR on sql02, encrypted with TDE); sql02 and sql03
// the replicas of the availability group agorders with its database
// Orders; backup
// servers bak01 and bak02 served by Samba over SMB (internal/sambatest) and
// reached by SQL Server as \\bakNN\backup; a verification instance
// verify01; the embedded Temporal server on a SQLite file (so a restart
// keeps the workflows); real worker processes (the test binary re-executed)
// whose zap logs go to files; the configuration as YAML, loaded with
// internal/config, with short waits so a cycle takes seconds; and an
// object store, vault01 (vault.go): versitygw (internal/s3test's binary)
// on its posix backend with versioning, a bucket with Object Lock, the
// worker's own S3 user limited by the README's bucket policy
// (s3test.WorkerPolicy: no version deleted, no governance bypassed), the
// uploads paced to VaultBandwidth, in parts of VaultPartSize (S3's
// smallest, part_size: 5MiB); sql01's sales and sql02's DBA
// (ImmutableTargets) have immutable_copy: vault01 and immutable_within
// ImmutableWithin (the key is left out, and I16 only notes a missing copy,
// when the configuration does not know it). The harness starts versitygw
// itself on fixed ports, so that a killed store comes back on the same
// directory and endpoint.
//
// Each run draws an estate (estate.go) beside its fault, and the fleet is
// brought to it first: each instance's SQL Server build (2016 to 2022, the
// verification instance now and then older than a source) and time zone
// (instances restarted on their data), the TDE certificate on verify01 or
// not, a start spelling the database otherwise (sales as SALES) and HR's
// databases: entry spelled hr, the group's primary, backup preference,
// readable secondary and synchronization state, the group's database started
// through the group or a replica, and a DBA's CHECKDB of the source just
// before. Before a run of sales, a database named like the set it is about
// to make (sales_<seq:08d>, selected by sql01's sales*) may be created and
// verified first (twin.go): the cancel, failure or retention of that set
// must leave the other database's files alone.
//
// A run (sim.go) starts one cycle of a random (instance, database) through
// a random entry point (the canonical id as `starter run` uses it, a Web UI
// id, a Schedule trigger) and injects at most one fault (chosen in
// faults.go, injected and healed in injection.go): worker killed or
// frozen, Temporal restarted, smbd killed or frozen, the emulator crashed
// or its connections cut at a percent of BACKUP/RESTORE/CHECKDB,
// the source database restored from an older verified set, a second start
// of the same database, cancel, a stripe byte flipped, a share full, or
// files a share writer plants on one share, bak02, at a moment of the run
// (hostile.go): a stripe-named symbolic link and a `.partial` one to a file
// outside the share, a 64 GiB sparse file named like a manifest, a real
// manifest altered to say verified (fresh time, another run id, "" or the
// running cycle's; unsigned or signed with another key), an empty stripe
// numbered 999999999999999999; they stay on the share. The manifests are
// signed (manifest_keys), so only what a worker wrote is trusted, by the
// product and by the checker alike. A Web UI start now and then types the
// name with a leading or trailing blank.
//
// The log chain (logchain.go, logfaults.go): sql01's DBA has log_backup
// (every LogEvery, below the configuration's minimum, set on the loaded
// configuration) and log_proof: standby (log_proof_lag ProofLag, the
// point-in-time proof every PITEvery), the
// emulator's workload commits CommitRate rows a second into its
// dbo.CommitLog, and every worker starts the database's LogChain when it
// starts, as the production worker does; the chain's and the proof's
// activities run beside the cycles, so every fault above may hit them.
// Faults of its own, before the run's cycle starts: a DBA's BACKUP LOG of
// DBA to a share (the worker may adopt it) or to a disk no worker reaches,
// DBA switched to SIMPLE and back to FULL after the heal time, verify01
// crashing at a percent of its next RESTORE (the standby's RESTORE LOG, or
// its seeding) and a log backup file of the chain deleted on one server.
//
// Faults of the object store (vault.go), drawn for a run of one of
// ImmutableTargets: vault01 down (versitygw killed with SIGKILL at a step,
// started again on its directory and port after the heal time); an upload
// cut, aimed at CutTarget (sales: one stripe of about 6 MiB, above
// vault01's part_size of 5 MiB, so a multipart upload of two parts sent at
// once): versitygw is killed once its ListParts shows a part of the stripe
// and not all of them and the copy's heartbeat names that upload (the
// checkpoint a retry resumes from; heartbeats are throttled to one a
// second), and stays down until the upload would have ended (a part's
// request goes out once the bandwidth limit let all its bytes through: a
// store back before it is never missed); the run notes the parts held at
// the cut and, from the worker's log, the parts the retry kept and the
// bytes it sent (a set below the part size is cut at a percent of its
// upload, back after a quarter of the heal time); and the worker's
// credentials trying to destroy a copy: with the
// worker's configured S3 user the harness deletes a locked version of a
// copied set (with and without a governance bypass), shortens its
// retention, turns it to governance with a bypass (each must be refused),
// overwrites the key and deletes it without a version (S3 allows both: a
// new version and a delete marker, which the harness removes with the root
// user); the locked version must keep its bytes.
//
// The recovery entries (recoverentry.go): one run in eight recovers
// LogTarget instead of running a cycle, as `starter recover` does
// (client.StartRecover, to a point drawn in the proven window or latest,
// into RecoverScratch on verify01, which the harness drops afterwards), as
// `starter drill` does (client.StartDrill, with such a point) or as its
// drill schedule does (a trigger: drill: picks a point of the last 10
// minutes of the proven window). Faults of their own: the worker restoring
// log n of m killed, verify01 crashing at a percent of its next RESTORE
// once n logs are restored, one backup server gone for the run (smbd
// killed, its share unreachable for every instance), a log file the
// recover needs deleted or damaged on one server (put back after the run).
//
// Every choice comes from a generator seeded by (seed, run), so a seed replays
// (what the product does with them may still vary with timing). A cycle
// stuck on an activity of a killed worker that is not retried before its
// StartToClose timeout is noted as a stall and terminated after StallLimit.
//
// After every run the checker (invariants.go) reads every manifest and file
// on both servers, the verification instance's restore history, every
// workflow history and the worker logs:
//
//	I1 no byte of a set that was ever verified changes while any manifest still calls it verified;
//	I2 every verified manifest's set was restored from its own backup and CHECKDB'd on that copy;
//	I3 for every database with a verified set, the newest verified set is intact on two servers;
//	I4 a sequence number of an (instance, database) never names two backup sets;
//	I5 a set is failed only with content evidence, never because a server was away
//	   (the evidence is checked: backup_incomplete only if no BACKUP of its files
//	   completed, damage only if the harness damaged it or its BACKUP never completed);
//	I6 no history, log line, manifest or error holds a configured password;
//	I7 no set is verified unless a CHECKDB of its copy, sent by the run that
//	   verified it after the copy's RESTORE ended, ended clean on the
//	   verification instance before the set was marked verified (the
//	   verification instance's statement log and restore history, and the
//	   proof the manifest names);
//	I8 no set is failed for a reason outside its content: no environment,
//	   version, permission or configuration error type marks a complete set
//	   failed, damage evidence carries the type that proves it, and no set
//	   is condemned while the estate made it unreadable on the
//	   verification instance;
//	I13 what a share writer planted neither leaks nor steers: the file the
//	   planted links point to, outside the share, keeps its content, size
//	   and mtime, and no file on either share holds its content; the
//	   product's status (status.Load over SMB) counts no set as verified
//	   that only an unauthenticated manifest calls verified, and reports the
//	   planted manifests it reads (unauthenticated, or broken); no
//	   database's cycles fail the same way StuckAfter times in a row while
//	   files planted for it lie on the share (when the estate can read its
//	   sets);
//	I14 no worker process ends unless the harness killed it, and no worker
//	   log holds a Go runtime panic;
//	I15 every trusted manifest was written by its database's own cycle
//	   (workflows.CycleWorkflowID), and a Web UI start that typed the name
//	   with a blank launched that cycle, was skipped for it or was refused
//	   with InvalidConfig, never ran a cycle under its own id.
//	I16 the immutable copy: every trusted verified set of a database with
//	   immutable_copy verified more than ImmutableWithin ago (the harness's
//	   clock) is on vault01, read with the root user: each object its copy
//	   recorded there under its version, in compliance mode, locked at
//	   least until the recorded retain-until and its verification plus the
//	   database's immutable lock (retention.immutable_for, else one rpo
//	   beyond what the backup servers keep), its SHA-256 the manifest's;
//	   a set without a recorded copy counts when all its stripes and its
//	   manifest are there so; else status.Load reports the database out
//	   of its objectives with a reason naming the immutable copy and the
//	   set. A recorded object stays checked after retention dropped its set
//	   from the backup servers, and no request of the worker's credentials
//	   that would delete or unlock a locked version succeeds.
//
//	I9 the chain from the newest verified full to the newest log backup has
//	   no LSN gap (each log starting at or before where the last ended), no
//	   full of it followed by a log taken on the other side of a restore of
//	   the source over itself (the rollback fault; two recovery paths), and
//	   each of its log files is intact (size, SHA-256) on every server its
//	   record names (one the harness deleted once the product has had
//	   ProofLag to notice), or the product says so: its LogChain query
//	   broken with the break or degraded with the error, its LogProof's
//	   error or status's reasons (status.Load) naming the log;
//	I10 every log backup of that chain finished more than ProofLag ago is
//	   proven, or LogChain, LogProof or status says why not;
//	I11 the checker restores the chain on an instance of its own (pit01,
//	   which no fault reaches) from the newest verified full and the logs
//	   to a random T in the proven window (on one UTC offset of the
//	   source): without STOPAT it holds exactly the source's rows up to its
//	   newest, with STOPAT = T exactly the rows the full holds and those
//	   committed at or before T; and it replays each point-in-time proof
//	   the product recorded as ok (pit_proof.every PITEvery; its full, its
//	   logs, its STOPAT) and compares the rows the same way.
//
//	I12 a recovery entry's Recover (a drill's child) either completed with
//	   the target holding exactly the source's rows committed at or before
//	   the point it reports (read on verify01; for a drill while its copy
//	   exists, else its record's restore replayed on pit01), that point the
//	   one asked (for the latest: no row committed by it missing, none
//	   after the bound it reports held (the last backup's finish: what
//	   committed while that backup ran may or may not be in it), and no
//	   earlier than the newest proven log held
//	   before it started; rows compared on the source's clock only where
//	   the harness ran it on one zone over the last log's span, which
//	   is then the offset that log records), or ended failed with a stable error type of
//	   package activities; a drill's record holds its run, its copy is
//	   gone after it (or its record says why not), and no recovery entry
//	   sends the source database a restore, drop, change, write, CHECKDB
//	   or tail-log backup.
//
// The chain's records are read with their own rules (LSNs, files, rows):
// the product's verdict is only what its queries say.
//
// `make chaos SEED=n RUNS=n` runs TestChaos; each violation is printed with
// the seed, run and fault to replay it, the recovery entries are counted
// by how they ended with what I12 judged and skipped, and the output ends with
// `chaos: <runs> runs, <faults> faults, <violations> invariant violations (seed <n>)`.
package chaos
