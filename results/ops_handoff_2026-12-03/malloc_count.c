#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
static atomic_long n_malloc, n_free;
extern void *__libc_malloc(size_t); extern void __libc_free(void*);
void* malloc(size_t s){ atomic_fetch_add(&n_malloc,1); return __libc_malloc(s);} 
void free(void*p){ if(p) atomic_fetch_add(&n_free,1); __libc_free(p);} 
__attribute__((destructor)) static void done(void){ fprintf(stderr,"mallocs=%ld frees=%ld\n", n_malloc, n_free);} 
