-- Title: Which task waited longest on which port?
-- SPDX-License-Identifier: GPL-2.0-only
-- task names who made each access: on Xen the guest's page-table base (CR3),
-- one per guest process (kernel threads share the kernel's); on the simulator
-- the guest thread's id.  Per session, task and port: accesses, the guest's
-- total and worst wait (trap to resume) and the physical CPUs its vCPUs ran
-- on, over 'ok' transactions, the task with the longest total wait first.
SELECT session_id,
       printf('0x%x', task) AS task,
       printf('0x%x', port) AS port,
       COUNT(*) AS accesses,
       SUM(wait_ns) AS wait_ns,
       MAX(wait_ns) AS max_wait_ns,
       GROUP_CONCAT(DISTINCT pcpu) AS pcpus
FROM transaction_times
WHERE status = 'ok' AND task IS NOT NULL
GROUP BY session_id, task, port
ORDER BY session_id, SUM(SUM(wait_ns)) OVER (PARTITION BY session_id, task) DESC,
         task, wait_ns DESC, port;
