/*
 * A GPU timeline without Nsight: a CUPTI activity recorder the CUDA driver loads into any
 * program (CUDA_INJECTION64_PATH=libtimeline.so). It writes one line per kernel and copy,
 * with the GPU's own timestamps, to $TIMELINE_OUT at exit:
 *   K dev stream start_ns end_ns name
 *   C dev stream start_ns end_ns bytes kind          (host <-> device, memset as kind -1)
 *   P dev stream start_ns end_ns bytes src dst       (peer copies)
 *   A - thread start_ns end_ns name                  (driver API calls, with TIMELINE_API=1)
 * Built on the GPU machine by timeline.sh, which picks the record structs its CUPTI has.
 */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>

static FILE *out;

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *size = 16 << 20;
  *buffer = (uint8_t *)aligned_alloc(8, *size);
  *max_records = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)ctx; (void)stream; (void)size;
  CUpti_Activity *r = NULL;
  while (cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      KERNEL_T *k = (KERNEL_T *)r;
      fprintf(out, "K %u %u %llu %llu %s\n", k->deviceId, k->streamId, (unsigned long long)k->start,
              (unsigned long long)k->end, k->name);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      MEMCPY_T *m = (MEMCPY_T *)r;
      fprintf(out, "C %u %u %llu %llu %llu %d\n", m->deviceId, m->streamId, (unsigned long long)m->start,
              (unsigned long long)m->end, (unsigned long long)m->bytes, (int)m->copyKind);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      MEMSET_T *m = (MEMSET_T *)r;
      fprintf(out, "C %u %u %llu %llu %llu -1\n", m->deviceId, m->streamId, (unsigned long long)m->start,
              (unsigned long long)m->end, (unsigned long long)m->bytes);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      PTOP_T *p = (PTOP_T *)r;
      fprintf(out, "P %u %u %llu %llu %llu %u %u\n", p->deviceId, p->streamId, (unsigned long long)p->start,
              (unsigned long long)p->end, (unsigned long long)p->bytes, p->srcDeviceId, p->dstDeviceId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      CUpti_ActivityAPI *a = (CUpti_ActivityAPI *)r;
      const char *name = "?";
      cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, a->cbid, &name);
      fprintf(out, "A - %u %llu %llu %s\n", a->threadId, (unsigned long long)a->start, (unsigned long long)a->end, name);
      break;
    }
    default:
      break;
    }
  }
  free(buffer);
}

static void finish(void) {
  cuptiActivityFlushAll(1);
  if (out) fclose(out);
}

int InitializeInjection(void) {
  const char *path = getenv("TIMELINE_OUT");
  out = fopen(path ? path : "timeline.txt", "w");
  if (!out) return 0;
  cuptiActivityRegisterCallbacks(requested, completed);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  if (getenv("TIMELINE_API")) cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
  atexit(finish);
  return 1;
}
