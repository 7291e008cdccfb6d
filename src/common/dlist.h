/* SPDX-License-Identifier: Apache-2.0 */
/* Intrusive doubly linked lists threaded through `prev` and `next` members of the
 * element type, anchored at a plain head pointer (NULL when empty): connections,
 * tunnels, calls, processes, waiters. Iterate with
 *   for (struct x *e = head, *nx; e; e = nx) { nx = e->next; ... }
 * The macros evaluate their arguments more than once: pass plain lvalues. */
#pragma once

/** Links node (not on any list, or removed) in front of head. */
#define DLIST_PUSH(head, node)           \
    do {                                 \
        (node)->prev = NULL;             \
        (node)->next = (head);           \
        if ((node)->next)                \
            (node)->next->prev = (node); \
        (head) = (node);                 \
    } while (0)

/** Unlinks node from the list at head and clears its links. Removing a node that is
 * not linked (links cleared, not the head) does nothing, so a second call is harmless. */
#define DLIST_REMOVE(head, node)               \
    do {                                       \
        if ((node)->prev)                      \
            (node)->prev->next = (node)->next; \
        else if ((head) == (node))             \
            (head) = (node)->next;             \
        if ((node)->next)                      \
            (node)->next->prev = (node)->prev; \
        (node)->prev = (node)->next = NULL;    \
    } while (0)
